import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { GenericSource } from '../config.js';

/**
 * Standard Webhooks (https://www.standardwebhooks.com) through the `standardwebhooks`
 * package, for one source with one or more secrets (rotation): incoming webhooks verify
 * against any of them; outgoing replies carry one `v1,` signature per secret, so a receiver
 * that knows only the old or only the new secret verifies during a rotation.
 */

/** The package's tolerance: five minutes either way of the receiver's clock. */
export const TOLERANCE_SECONDS = 5 * 60;

/** `missing-headers`: absent or malformed webhook-* headers; `timestamp`: outside the tolerance. */
export type VerifyFailure = 'missing-headers' | 'timestamp' | 'signature';

export interface StandardHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

export class StandardWebhookSource {
  readonly name: string;
  private readonly hooks: Webhook[];

  constructor(source: GenericSource) {
    this.name = source.name;
    this.hooks = source.secrets.map((s) => new Webhook(s));
  }

  /**
   * Checks the signature over the raw body as received, before anything parses it.
   * Returns undefined when valid, else what was wrong.
   */
  verify(raw: Buffer, headers: Record<string, string | string[] | undefined>): VerifyFailure | undefined {
    const pick = (name: string) => {
      const v = headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    const wanted = {
      'webhook-id': pick('webhook-id') ?? '',
      'webhook-timestamp': pick('webhook-timestamp') ?? '',
      'webhook-signature': pick('webhook-signature') ?? '',
    };
    if (!wanted['webhook-id'] || !wanted['webhook-timestamp'] || !wanted['webhook-signature']) {
      return 'missing-headers';
    }
    for (const hook of this.hooks) {
      try {
        hook.verify(raw, wanted, { jsonParse: false });
        return undefined;
      } catch (err) {
        if (!(err instanceof WebhookVerificationError)) throw err;
        // Headers and timestamp are judged before any signature: no other secret changes that.
        if (/too old|too new/.test(err.message)) return 'timestamp';
        if (/Invalid Signature Headers/.test(err.message)) return 'missing-headers';
      }
    }
    return 'signature';
  }

  /** Headers for an outgoing body: `webhook-id` is the caller's id, stable across redeliveries and unique across messages (receivers dedupe on it). */
  sign(id: string, body: string, at = new Date()): StandardHeaders {
    return {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': this.hooks.map((h) => h.sign(id, at, body)).join(' '),
    };
  }
}

/** Every configured source by name. */
export function standardSources(sources: readonly GenericSource[]): Map<string, StandardWebhookSource> {
  return new Map(sources.map((s) => [s.name, new StandardWebhookSource(s)]));
}
