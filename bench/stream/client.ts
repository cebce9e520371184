import { type ClientRequest, type IncomingMessage, request } from 'node:http';

/**
 * A lean `/v1/ui` client for the stream benchmark: one raw HTTP request per conversation and
 * a hand-rolled parse of the UI message stream (SSE `data:` lines), so a thousand of them in
 * the bench process cost little next to the processes measured. Only `text-delta` chunks
 * are JSON-parsed; the rest are recognised by their type field.
 */

/** Epoch ms with sub-ms precision, the same clock as the mock model's `/first-content`. */
export function clock(): number {
  return performance.timeOrigin + performance.now();
}

export interface UiTurn {
  chatKey: string;
  status: number;
  /** When the first `text-delta` chunk arrived. */
  firstDeltaAt?: number;
  /** When the `start` chunk arrived: the response follows an open reply from then on. */
  startAt?: number;
  doneAt?: number;
  /** The reply's text, joined from its deltas. */
  text: string;
  chunks: number;
  /** `data: [DONE]` arrived. */
  done: boolean;
  error?: string;
  /** Types of the last chunks (and a refusal's body), to say why a reply fell short. */
  tail: string[];
}

export interface UiTurnHandle {
  /** The response so far (filled in as it arrives). */
  turn: UiTurn;
  result: Promise<UiTurn>;
  /** Resolves when the `start` chunk arrived (or the response ended without one). */
  started: Promise<void>;
  cancel(): void;
}

const TYPE_TEXT_DELTA = '"type":"text-delta"';
const TYPE_START = '"type":"start"';

/** POST /v1/ui as DefaultChatTransport sends it; the response is read to its end. */
export function uiTurn(
  base: string,
  chatKey: string,
  token: string,
  messageId: string,
  text: string,
): UiTurnHandle {
  const body = JSON.stringify({
    id: chatKey,
    messages: [{ id: messageId, role: 'user', parts: [{ type: 'text', text }] }],
    trigger: 'submit-message',
    messageId: null,
  });
  const turn: UiTurn = { chatKey, status: 0, text: '', chunks: 0, done: false, tail: [] };
  let req: ClientRequest | undefined;
  let markStarted: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    markStarted = resolve;
  });
  const result = new Promise<UiTurn>((resolve) => {
    const finish = (error?: string) => {
      if (error && !turn.error) turn.error = error;
      markStarted();
      resolve(turn);
    };
    req = request(
      `${base}/v1/ui`,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res: IncomingMessage) => {
        turn.status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (piece: string) => {
          if (turn.status !== 200) {
            turn.tail.push(piece.slice(0, 200));
            return;
          }
          buffer += piece;
          let end = buffer.indexOf('\n\n');
          while (end >= 0) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            end = buffer.indexOf('\n\n');
            onEvent(event);
          }
        });
        res.on('end', () => finish(turn.done ? undefined : `ended without [DONE] (HTTP ${turn.status})`));
        res.on('error', (err) => finish(err.message));
      },
    );
    const onEvent = (event: string) => {
      if (!event.startsWith('data: ')) return; // heartbeats are comments
      const data = event.slice(6);
      if (data === '[DONE]') {
        turn.done = true;
        turn.doneAt = clock();
        return;
      }
      turn.chunks++;
      if (!data.includes(TYPE_TEXT_DELTA)) {
        turn.tail.push(data.length > 120 ? `${data.slice(0, 120)}…` : data);
        if (turn.tail.length > 6) turn.tail.shift();
      }
      if (data.includes(TYPE_TEXT_DELTA)) {
        turn.firstDeltaAt ??= clock();
        turn.text += (JSON.parse(data) as { delta: string }).delta;
      } else if (turn.startAt === undefined && data.includes(TYPE_START)) {
        turn.startAt = clock();
        markStarted();
      }
    };
    req.on('error', (err) => finish(err.message));
    req.end(body);
  });
  return { turn, result, started, cancel: () => req?.destroy() };
}
