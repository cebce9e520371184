import { AbstractChat, type ChatState, type ChatStatus, DefaultChatTransport, type UIMessage } from 'ai';

/**
 * The AI SDK's own chat (`AbstractChat`, which `useChat` wraps) with a plain array for its
 * state and the unchanged `DefaultChatTransport`: what a web page runs, in Node. Every
 * change of a message is recorded as a frame, as a page would render it.
 */
class ArrayState implements ChatState<UIMessage> {
  status: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  /** Each render: the text of the message that changed. */
  readonly frames: Array<{ at: number; id: string; text: string }> = [];

  pushMessage = (message: UIMessage) => {
    this.messages = [...this.messages, message];
    this.frame(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: UIMessage) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
    this.frame(message);
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);

  private frame(message: UIMessage) {
    if (message.role === 'assistant')
      this.frames.push({ at: Date.now(), id: message.id, text: textOf(message) });
  }
}

export function textOf(message: UIMessage | undefined): string {
  return (message?.parts ?? []).flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
}

export class NodeChat extends AbstractChat<UIMessage> {
  readonly store: ArrayState;

  constructor(ingressUrl: string, chatKey: string, token: string) {
    const state = new ArrayState();
    super({
      id: chatKey,
      state,
      transport: new DefaultChatTransport({
        api: `${ingressUrl}/v1/ui`,
        headers: { authorization: `Bearer ${token}` },
      }),
    });
    this.store = state;
  }

  /** The newest assistant message. */
  get reply(): UIMessage | undefined {
    return this.store.messages.findLast((m) => m.role === 'assistant');
  }
}
