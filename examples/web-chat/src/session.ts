import type { UIMessage } from 'ai';

/** Where the page talks to and as whom: one chat, one browser token for it. */
export interface Session {
  /** The ingress origin, e.g. http://127.0.0.1:3000. */
  api: string;
  /** The chatKey. */
  chat: string;
  /** A per-chat JWT minted by the app's backend (never API_TOKEN). */
  token: string;
}

interface TokenAnswer {
  api?: string;
  chat: string;
  token: string;
}

/**
 * `?chat=…&token=…[&api=…]` opens that chat. Without a token the page asks the server that
 * served it (`./token?chat=…`), which is what `chatlane demo --web` provides: in an app, that
 * endpoint checks who the user is before it mints a token for their chat.
 */
export async function resolveSession(href: string): Promise<Session> {
  const url = new URL(href);
  const q = url.searchParams;
  let chat = q.get('chat') ?? '';
  let token = q.get('token') ?? '';
  let api = q.get('api') ?? '';
  if (!token) {
    const res = await fetch(new URL(`token${chat ? `?chat=${encodeURIComponent(chat)}` : ''}`, url));
    if (!res.ok) throw new Error(await res.text());
    const answer = (await res.json()) as TokenAnswer;
    chat = answer.chat;
    token = answer.token;
    api ||= answer.api ?? '';
  }
  if (!chat) throw new Error('no chat: open the page with ?chat=<chatKey>&token=<browser token>');
  return { api: (api || url.origin).replace(/\/+$/, ''), chat, token };
}

export function authHeaders(session: Session): Record<string, string> {
  return { authorization: `Bearer ${session.token}` };
}

/** The chat as chatlane holds it: the history, then the messages still waiting. */
export async function loadMessages(session: Session): Promise<UIMessage[]> {
  const res = await fetch(`${session.api}/v1/ui/${encodeURIComponent(session.chat)}/messages`, {
    headers: authHeaders(session),
  });
  if (!res.ok) throw new Error(await res.text());
  return ((await res.json()) as { messages: UIMessage[] }).messages;
}

/** chatlane refuses with `{ error: { code, message } }`; show the code and the sentence. */
export function describeError(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (body.error?.code) return `${body.error.code}: ${body.error.message ?? ''}`.trim();
  } catch {
    // Not chatlane's JSON (a network error, a proxy's page): show it as it came.
  }
  return text;
}
