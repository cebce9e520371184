import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

/** A fresh Standard Webhooks secret (`whsec_` + 32 random bytes). */
export const webhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

/** The headers a Standard Webhooks sender puts on `payload`, signed by the `standardwebhooks` package. */
export function signedHeaders(
  secret: string,
  payload: string,
  opts: { id?: string; timestamp?: number } = {},
): Record<string, string> {
  const id = opts.id ?? `msg_${randomBytes(6).toString('hex')}`;
  const at = new Date((opts.timestamp ?? Math.floor(Date.now() / 1000)) * 1000);
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, payload),
  };
}

/**
 * A stack's environment for the generic webhook source `crm` signed with `secret`, replying
 * to plain-HTTP receivers on 127.0.0.1, delivered by a delivery process (not the workers).
 */
export function crmSourceEnv(secret: string): Record<string, string> {
  return {
    GENERIC_WEBHOOK_SOURCES: 'crm',
    GENERIC_WEBHOOK_SECRETS_CRM: secret,
    GENERIC_WEBHOOK_REPLY_HOSTS: '127.0.0.1',
    GENERIC_WEBHOOK_REPLY_ALLOW_HTTP: 'true',
    DELIVERY_IN_WORKER: 'false',
  };
}
