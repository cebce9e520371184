import type { UIMessage } from 'ai';
import { useEffect, useState } from 'react';
import { ChatView } from './ChatView';
import { describeError, loadMessages, resolveSession, type Session } from './session';

type Loaded = { session: Session; messages: UIMessage[]; loadError?: string };

/** Finds the session, loads the chat's messages, then hands both to the chat view. */
export function App() {
  const [loaded, setLoaded] = useState<Loaded>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    let live = true;
    (async () => {
      const session = await resolveSession(window.location.href);
      try {
        const messages = await loadMessages(session);
        if (live) setLoaded({ session, messages });
      } catch (err) {
        // Still show the chat: a send gets the same refusal, shown where it happened.
        if (live) setLoaded({ session, messages: [], loadError: describeError(err) });
      }
    })().catch((err: unknown) => live && setError(describeError(err)));
    return () => {
      live = false;
    };
  }, []);

  if (error)
    return (
      <main>
        <p className="error" role="alert">
          {error}
        </p>
      </main>
    );
  if (!loaded) return <main>Loading…</main>;
  return <ChatView session={loaded.session} initialMessages={loaded.messages} loadError={loaded.loadError} />;
}
