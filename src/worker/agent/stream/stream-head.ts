/**
 * Parts a model stream opens with before its answer. They say nothing yet about whether the
 * answer will come, so a stream that fails after them has shown the user nothing. `custom` is
 * a provider's own metadata (Anthropic sends one for its message_start).
 */
const LEADING = new Set(['stream-start', 'response-metadata', 'raw', 'custom']);

type ReadResult<P> = Awaited<ReturnType<ReadableStreamDefaultReader<P>['read']>>;

/** A model stream read up to its first part that is not a leading one. */
export type StreamHead<P> =
  | {
      /** The stream as the model sent it: the parts read so far, then the rest, untouched. */
      stream: ReadableStream<P>;
      failed: false;
    }
  | {
      /** As above; for a caller that hands the failure on as it came. */
      stream: ReadableStream<P>;
      failed: true;
      /** The error part's error, or what the stream threw. */
      error: unknown;
      /** The error was thrown by the stream (a dropped connection, a timeout), not sent as a part. */
      thrown: boolean;
      /** Drops the rest, for a caller that asks another model instead. */
      cancel(reason: unknown): void;
    };

/**
 * Reads `stream` until its first content, finish or error part (or its end or failure). The
 * stream handed back is the same sequence of parts: the buffered head, then each further
 * part pulled straight from the original reader. No transform stage and no closure per part:
 * this is on the path of every streamed call of a fallback chain. (Per part, on a loaded
 * 2-core box: ~0.2–1.4 µs over reading the stream directly, a pipeThrough stage ~1.3–2 µs;
 * `npx tsx bench/probes/stream-splice.ts`, bench/results/stream-splice-2026-11-26.txt.)
 */
export async function readStreamHead<P extends { type: string; error?: unknown }>(
  stream: ReadableStream<P>,
): Promise<StreamHead<P>> {
  const reader = stream.getReader();
  const head: P[] = [];
  const cancel = (reason: unknown) => {
    reader.cancel(reason).catch(() => undefined);
  };
  for (;;) {
    let next: ReadResult<P>;
    try {
      next = await reader.read();
    } catch (error) {
      // Read again by the handed-back stream, which then fails with this same error.
      return { stream: spliced(head, reader), failed: true, error, thrown: true, cancel };
    }
    if (next.done) return { stream: spliced(head, reader), failed: false };
    const part = next.value;
    head.push(part);
    if (part.type === 'error')
      return { stream: spliced(head, reader), failed: true, error: part.error, thrown: false, cancel };
    if (!LEADING.has(part.type)) return { stream: spliced(head, reader), failed: false };
  }
}

/** `head`, then what `reader` has left: its parts, its end, its error; a cancel reaches its source. */
function spliced<P>(head: readonly P[], reader: ReadableStreamDefaultReader<P>): ReadableStream<P> {
  let controller: ReadableStreamDefaultController<P>;
  // Built once per stream: each pull only reads and hands on.
  const handOn = (next: ReadResult<P>) => {
    if (next.done) controller.close();
    else controller.enqueue(next.value);
  };
  return new ReadableStream<P>(
    {
      start(c) {
        controller = c;
        for (const part of head) c.enqueue(part);
      },
      pull: () => reader.read().then(handOn),
      cancel: (reason) => reader.cancel(reason),
    },
    // Pulled only when the consumer asks: the model's stream keeps its own pace and backpressure.
    { highWaterMark: 0 },
  );
}
