import { APICallError, type LanguageModel } from 'ai';
import { readStreamHead } from './stream/stream-head.js';

// As model.ts has it; declared here too, since model.ts builds this class.
type ModelV4 = Extract<LanguageModel, { specificationVersion: 'v4' }>;

/** What the fallback needs to know about errors and time; role-model.ts builds it. */
export interface FallbackPolicy {
  /** An outage of the model (5xx, timeout, refused connection, 429): the next model may serve. */
  isOutage(err: unknown): boolean;
  /** 429: retried on the same model (`rateLimitRetries`) before the next one is tried. */
  isRateLimit(err: unknown): boolean;
  /** Each model call's own deadline, so a hung model leaves time for the next one. */
  attemptTimeoutMs?: number;
  /** Retries of a rate-limited model before falling back (the AI SDK's default, 2). */
  rateLimitRetries?: number;
  /** First wait before such a retry when the answer names none (doubles per retry; the SDK's 2 s). */
  retryDelayMs?: number;
  /** A step moves from `from` to `to` after `err`. */
  onFallback?(from: string, to: string, err: unknown): void;
  /**
   * A model's stream ran out of its deadline before any content, so the call moves on. Its
   * error parts, failed opens and broken streams reach the model's own observer (model.ts),
   * which says nothing of an aborted stream: this one nothing else sees.
   */
  onStreamFailed?(model: string, err: unknown): void;
}

type CallOptions = Parameters<ModelV4['doGenerate']>[0];
type StreamResult = Awaited<ReturnType<ModelV4['doStream']>>;
type Call<R> = (index: number, options: CallOptions) => PromiseLike<R>;

const MAX_RETRY_AFTER_MS = 60_000;

/** The wait a 429 asks for (retry-after-ms, then retry-after in seconds), as the AI SDK reads it. */
function retryAfterMs(err: unknown): number | undefined {
  if (!APICallError.isInstance(err)) return undefined;
  const headers = err.responseHeaders ?? {};
  const ms = Number.parseFloat(headers['retry-after-ms'] ?? '');
  if (Number.isFinite(ms) && ms >= 0 && ms < MAX_RETRY_AFTER_MS) return ms;
  const seconds = Number.parseFloat(headers['retry-after'] ?? '');
  if (Number.isFinite(seconds) && seconds >= 0 && seconds * 1000 < MAX_RETRY_AFTER_MS) return seconds * 1000;
  return undefined;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * LLM_FALLBACK_MODELS: one model object over the configured chain. A call goes to the first
 * model; when it fails for an outage (after its retries, for a 429) the same call goes to the
 * next, and so on; the last model's error is the step's. A refused message, bad credentials or
 * an ended turn are thrown at once: another model would not change them. Each model's result
 * names it (model.ts `asServedBy`), so the step records who served it.
 *
 * An async method, unlike the single model's path (model.ts): its frame waits through the
 * call (a stream's, until its first content part). Only a worker with fallback models pays
 * for it.
 */
export class FallbackModel implements ModelV4 {
  readonly specificationVersion = 'v4';
  readonly provider = 'chatlane.fallback';

  constructor(
    private readonly models: readonly ModelV4[],
    private readonly ids: readonly string[],
    private readonly policy: FallbackPolicy,
  ) {}

  get modelId(): string {
    return this.ids[0] ?? '';
  }

  get supportedUrls(): ModelV4['supportedUrls'] {
    return this.models[0]!.supportedUrls;
  }

  doGenerate(options: CallOptions): ReturnType<ModelV4['doGenerate']> {
    return this.run(options, (i, o) => this.models[i]!.doGenerate(o));
  }

  /**
   * Falls back while the stream opens (an error answer) and after it opened, until its first
   * content part: an error part or a failed stream before any text, reasoning or tool call is
   * an outage like a failed open. From the first content part on, the stream is the step's,
   * failure included: another model would show the user a second, different half-reply.
   */
  doStream(options: CallOptions): ReturnType<ModelV4['doStream']> {
    const parent = options.abortSignal;
    return this.run(options, (i, o) => this.stream(i, o, parent));
  }

  /** Model `i`'s stream once it has shown content (or failed in a way that does not fall back). */
  private stream(i: number, options: CallOptions, parent: AbortSignal | undefined): Promise<StreamResult> {
    return Promise.resolve(this.models[i]!.doStream(options)).then(async (result) => {
      const head = await readStreamHead(result.stream);
      if (head.failed && this.fallsBack(i, head.error, parent)) {
        head.cancel(head.error);
        // Only the attempt's deadline aborts it here (an ended turn does not fall back).
        if (head.thrown && options.abortSignal?.aborted)
          this.policy.onStreamFailed?.(this.ids[i]!, head.error);
        // run() moves on, as after a failed open (a 429 is retried on this model first).
        throw head.error;
      }
      result.stream = head.stream;
      return result;
    });
  }

  /** Whether model `i`'s failure moves the call on: an outage, with a model left and the turn not ended. */
  private fallsBack(i: number, err: unknown, parent: AbortSignal | undefined): boolean {
    return !parent?.aborted && i < this.models.length - 1 && this.policy.isOutage(err);
  }

  private async run<R>(options: CallOptions, call: Call<R>) {
    const { policy } = this;
    const retries = policy.rateLimitRetries ?? 2;
    for (let i = 0; ; i++) {
      for (let retry = 0; ; retry++) {
        try {
          return await this.attempt(i, options, call);
        } catch (err) {
          if (!this.fallsBack(i, err, options.abortSignal)) throw err;
          if (policy.isRateLimit(err) && retry < retries) {
            const wait = retryAfterMs(err) ?? (policy.retryDelayMs ?? 2000) * 2 ** retry;
            await sleep(wait, options.abortSignal);
            continue;
          }
          policy.onFallback?.(this.ids[i]!, this.ids[i + 1]!, err);
          break;
        }
      }
    }
  }

  /**
   * One model call, on a signal of its own when calls have a deadline. A streamed call's
   * deadline runs until its first content part (or its failure).
   */
  private attempt<R>(i: number, options: CallOptions, call: Call<R>): Promise<R> {
    const ms = this.policy.attemptTimeoutMs;
    if (!ms) return Promise.resolve(call(i, options));
    const parent = options.abortSignal;
    const controller = new AbortController();
    const onAbort = () => controller.abort(parent?.reason);
    if (parent?.aborted) onAbort();
    else parent?.addEventListener('abort', onAbort, { once: true });
    // The SDK's own reason for a step past its time: classified as the model's timeout.
    const timer = setTimeout(
      () => controller.abort(new DOMException(`Model call timeout of ${ms}ms exceeded`, 'TimeoutError')),
      ms,
    );
    return Promise.resolve(call(i, { ...options, abortSignal: controller.signal })).finally(() => {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onAbort);
    });
  }
}
