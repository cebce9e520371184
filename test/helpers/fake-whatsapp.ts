import { createHmac, randomBytes } from 'node:crypto';
import { type FakePlatform, type RecordedCall, startFakePlatform } from './fake-platform.js';

/**
 * A local Meta Graph API for the WhatsApp Cloud API (`WHATSAPP_API_URL=<url>`; the adapter
 * appends `/<apiVersion>/<phoneNumberId>/messages`) and Meta's side of the webhook:
 * `X-Hub-Signature-256` signing and `messages` change envelopes.
 */
export const WHATSAPP_PHONE_NUMBER_ID = '1098765432';
/** The Cloud API's limit on a text message's body; a longer one is refused (code 100). */
export const WHATSAPP_TEXT_LIMIT = 4096;

export interface FakeWhatsApp extends FakePlatform {
  /** POST …/<phoneNumberId>/messages calls that send a message (not typing / read receipts). */
  sends(): RecordedCall[];
  /** The bodies of the text messages it accepted, in order. */
  texts(): string[];
}

export async function startFakeWhatsApp(): Promise<FakeWhatsApp> {
  let seq = 0;
  const accepted: string[] = [];
  const fake = await startFakePlatform((call) => {
    if (call.method === 'POST' && /\/messages$/.test(call.path)) {
      if (call.body.status === 'read') return { body: { success: true } };
      const body = (call.body.text as { body?: unknown } | undefined)?.body;
      if (typeof body === 'string' && body.length > WHATSAPP_TEXT_LIMIT) {
        return graphError(
          400,
          100,
          `(#100) Param text['body'] must be at most ${WHATSAPP_TEXT_LIMIT} characters long.`,
        );
      }
      seq += 1;
      if (typeof body === 'string') accepted.push(body);
      return {
        body: {
          messaging_product: 'whatsapp',
          contacts: [{ input: call.body.to, wa_id: call.body.to }],
          messages: [{ id: `wamid.fake${seq}` }],
        },
      };
    }
    return { status: 404, body: { error: { message: 'unknown path', type: 'OAuthException', code: 803 } } };
  });
  const sends = () =>
    fake.callsTo(/\/messages$/).filter((c) => c.method === 'POST' && c.body.status !== 'read' && c.body.type);
  return Object.assign(fake, {
    sends,
    texts: () => [...accepted],
  });
}

/** Meta's signature header: `sha256=` + hex HMAC-SHA256 of the raw body with the app secret. */
export function whatsappSignedHeaders(appSecret: string, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`,
  };
}

export interface WhatsAppTextInput {
  from: string;
  text: string;
  id?: string;
  name?: string;
}

/** A `whatsapp_business_account` webhook with one inbound text message. */
export function whatsappTextWebhook(input: WhatsAppTextInput): Record<string, unknown> {
  return whatsappWebhook({
    contacts: [{ profile: { name: input.name ?? 'Alice' }, wa_id: input.from }],
    messages: [
      {
        from: input.from,
        id: input.id ?? `wamid.${randomBytes(8).toString('hex')}`,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: 'text',
        text: { body: input.text },
      },
    ],
  });
}

/** The envelope around one `messages` change value (statuses, reactions, ...). */
export function whatsappWebhook(value: Record<string, unknown>): Record<string, unknown> {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: 'WABA0',
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550001111', phone_number_id: WHATSAPP_PHONE_NUMBER_ID },
              ...value,
            },
          },
        ],
      },
    ],
  };
}

/** A Graph API error envelope, e.g. 429 / 130429 (throughput) or 400 / 131047 (24 h window). */
export const graphError = (status: number, code: number, message = 'graph error') => ({
  status,
  body: { error: { message, type: 'OAuthException', code, fbtrace_id: 'Afake' } },
});

/** The test app's secrets and its one user. */
export const WHATSAPP_APP_SECRET = 'meta-app-secret-for-tests';
export const WHATSAPP_VERIFY_TOKEN = 'verify-token-for-tests';
export const WHATSAPP_USER = '15551234567';
/** The chat of WHATSAPP_USER. */
export const WHATSAPP_CHAT = `whatsapp-${WHATSAPP_PHONE_NUMBER_ID}:${WHATSAPP_USER}`;

/** The WHATSAPP_* variables of a chatlane whose WhatsApp sender talks to `fake`. */
export function whatsappEnv(fake: { url: string }): Record<string, string> {
  return {
    WHATSAPP_ACCESS_TOKEN: 'EAAG-test-token',
    WHATSAPP_APP_SECRET,
    WHATSAPP_PHONE_NUMBER_ID,
    WHATSAPP_VERIFY_TOKEN,
    WHATSAPP_API_URL: fake.url,
  };
}

/** WHATSAPP_USER writes `text` to the bot: a signed webhook into `app` (its chat gets a route). */
export async function whatsappSays(
  app: { inject(opts: Record<string, unknown>): Promise<{ statusCode: number }> },
  text = 'hi',
): Promise<number> {
  const payload = JSON.stringify(whatsappTextWebhook({ from: WHATSAPP_USER, text }));
  const res = await app.inject({
    method: 'POST',
    url: '/webhooks/whatsapp',
    headers: whatsappSignedHeaders(WHATSAPP_APP_SECRET, payload),
    payload,
  });
  return res.statusCode;
}
