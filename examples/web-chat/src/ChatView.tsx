import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type UIMessage,
} from 'ai';
import { type FormEvent, useMemo, useState } from 'react';
import { authHeaders, describeError, loadMessages, type Session } from './session';

interface Props {
  session: Session;
  initialMessages: UIMessage[];
  loadError?: string | undefined;
}

/**
 * The AI SDK's own useChat with its default transport, unchanged: chatlane serves the
 * endpoints it calls. `resume: true` makes a reload (or a second tab) pick up a reply that
 * is still being written. A tool call that waits for a person shows Approve and Deny: the
 * answer goes with `addToolApprovalResponse`, and `sendAutomaticallyWhen` sends it once every
 * waiting call of the message is answered (chatlane then streams the turn that goes on).
 */
export function ChatView({ session, initialMessages, loadError }: Props) {
  const transport = useMemo(
    () => new DefaultChatTransport({ api: `${session.api}/v1/ui`, headers: authHeaders(session) }),
    [session],
  );
  const { messages, sendMessage, status, error, setMessages, addToolApprovalResponse } = useChat({
    id: session.chat,
    transport,
    messages: initialMessages,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    // A worker killed mid-reply: the stream carries an abort, then the takeover's reply,
    // which the submit path appends to the half message. The history is the record, so
    // once the reply ends the page shows what chatlane kept.
    onFinish: () => {
      loadMessages(session)
        .then((kept) => {
          if (kept.at(-1)?.role === 'assistant') setMessages(kept);
        })
        .catch(() => undefined);
    },
  });
  const [input, setInput] = useState('');

  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    const text = input.trim();
    if (!text) return;
    setInput('');
    void sendMessage({ text });
  };

  const shownError = error ? describeError(error) : loadError;
  return (
    <main data-status={status}>
      <header>
        <h1>chatlane</h1>
        <small>
          chat <code data-testid="chat">{session.chat}</code> · {status}
        </small>
      </header>
      <section aria-label="messages">
        {messages.map((m) => (
          <Message
            key={m.id}
            message={m}
            onAnswer={(id, approved) => void addToolApprovalResponse({ id, approved })}
          />
        ))}
      </section>
      {shownError && (
        <p className="error" role="alert">
          {shownError}
        </p>
      )}
      <form onSubmit={onSubmit}>
        <input
          aria-label="message"
          value={input}
          placeholder="Say something"
          onChange={(e) => setInput(e.target.value)}
        />
        <button type="submit" disabled={status === 'submitted' || status === 'streaming'}>
          Send
        </button>
      </form>
    </main>
  );
}

type Answer = (approvalId: string, approved: boolean) => void;

function Message({ message, onAnswer }: { message: UIMessage; onAnswer: Answer }) {
  return (
    <div className="message" data-role={message.role} data-id={message.id}>
      {message.parts.map((part, i) => {
        const key = `${message.id}-${i}`;
        if (part.type === 'text')
          return (
            <p key={key} className="text">
              {part.text}
            </p>
          );
        if (part.type === 'dynamic-tool' || part.type.startsWith('tool-'))
          return <ToolCall key={key} part={part} onAnswer={onAnswer} />;
        return null;
      })}
    </div>
  );
}

/** What a tool part says of its approval, when its call had to wait for a person. */
interface Approval {
  id: string;
  approved?: boolean;
  reason?: string;
  /** A rule answered it at once: nobody was asked. */
  isAutomatic?: boolean;
}

const OUTCOME: Record<string, string> = {
  'approval-requested': 'waiting for your approval',
  'approval-responded': 'answered',
  'output-available': 'approved',
  'output-error': 'approved, failed',
  'output-denied': 'denied',
};

/**
 * A tool call, collapsed: its name and state, its input and output on opening. A call that
 * waits for a person shows what it would run, with Approve and Deny; once answered, the outcome.
 */
function ToolCall({ part, onAnswer }: { part: UIMessage['parts'][number]; onAnswer: Answer }) {
  const p = part as {
    type: string;
    toolName?: string;
    state?: string;
    input?: unknown;
    output?: unknown;
    errorText?: string;
    approval?: Approval;
  };
  const name = p.type === 'dynamic-tool' ? (p.toolName ?? 'tool') : p.type.slice('tool-'.length);
  if (p.approval && !p.approval.isAutomatic) {
    const waiting = p.state === 'approval-requested';
    const outcome =
      p.state === 'approval-responded'
        ? p.approval.approved
          ? 'approved'
          : 'denied'
        : OUTCOME[p.state ?? ''];
    return (
      <div className="approval" data-tool={name} data-state={p.state} data-testid="approval">
        <p>
          <code>{name}</code> <span data-testid="approval-outcome">{outcome}</span>
          {p.approval.reason ? ` (${p.approval.reason})` : ''}
        </p>
        <pre>{JSON.stringify(p.input, null, 2)}</pre>
        {waiting && (
          <p className="actions">
            <button type="button" onClick={() => onAnswer(p.approval!.id, true)}>
              Approve
            </button>
            <button type="button" onClick={() => onAnswer(p.approval!.id, false)}>
              Deny
            </button>
          </p>
        )}
      </div>
    );
  }
  return (
    <details className="tool" data-tool={name}>
      <summary>
        tool <code>{name}</code> {p.state ? `(${p.state})` : ''}
      </summary>
      <pre>{JSON.stringify({ input: p.input, output: p.output ?? p.errorText }, null, 2)}</pre>
    </details>
  );
}
