import { webhookIdKey } from '../keys.js';
import { type RedisClient, scripts } from './scripts.js';

/** Where a claim left a webhook id: claimed now, already this chat's, or another chat's. */
export type WebhookIdClaim = { status: 'new' | 'same' } | { status: 'other'; chatKey: string };

/**
 * Idempotency of signed generic webhooks per source (Standard Webhooks: a `webhook-id` names
 * one message of the sender, whichever chat it is for). The chat's own `seen` set dedupes
 * within the chat; this claim, in the source's slot, dedupes across chats. Not atomic with
 * the chat's ingest (another slot): a claim whose message was not stored is released.
 */
export class WebhookIds {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly windowMs: number,
  ) {}

  async claim(source: string, webhookId: string, chatKey: string): Promise<WebhookIdClaim> {
    const [status, holder] = (await scripts.webhookClaim.run(
      this.redis,
      [webhookIdKey(this.prefix, source, webhookId)],
      [chatKey, this.windowMs],
    )) as ['new' | 'same' | 'other', string?];
    return status === 'other' ? { status, chatKey: holder ?? '' } : { status };
  }

  async release(source: string, webhookId: string, chatKey: string): Promise<void> {
    await scripts.webhookRelease.run(this.redis, [webhookIdKey(this.prefix, source, webhookId)], [chatKey]);
  }
}
