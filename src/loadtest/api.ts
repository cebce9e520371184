import { z } from 'zod';
import type { HttpClient, HttpOutcome } from './http.js';

/**
 * The deployment's public HTTP API as the load tool sees it, every answer checked with zod:
 * a deployment that answers something else is reported, never trusted.
 */

export const outboxItemSchema = z.looseObject({
  id: z.string(),
  text: z.string(),
  ts: z.number(),
  runId: z.string(),
});
export type OutboxItem = z.infer<typeof outboxItemSchema>;

export const eventSchema = z.looseObject({
  id: z.string(),
  type: z.string(),
  ts: z.number(),
  data: z.record(z.string(), z.unknown()),
});
export type ChatEvent = z.infer<typeof eventSchema>;

const pageOf = <T extends z.ZodType>(item: T) =>
  z.looseObject({ items: z.array(item), next: z.string().nullable() });

/** Only what the checks read of a history message. */
export const historyMessageSchema = z.looseObject({
  id: z.string(),
  role: z.string(),
  metadata: z
    .looseObject({
      ts: z.number().optional(),
      runId: z.string().optional(),
      kind: z.string().optional(),
    })
    .optional(),
});
export type HistoryMessage = z.infer<typeof historyMessageSchema>;

const messagesSchema = z.looseObject({
  messages: z.array(historyMessageSchema),
  pending: z.array(historyMessageSchema),
});

const archiveSchema = z.looseObject({
  items: z.array(
    z.looseObject({ index: z.number(), kind: z.string(), messages: z.array(historyMessageSchema) }),
  ),
  next: z.number().nullable(),
});

const ackSchema = z.looseObject({
  status: z.enum(['accepted', 'duplicate']),
  messageId: z.string().optional(),
});

export type SendOutcome =
  /** `storedId`: the id the deployment stored the message under (a webhook's is `<source>:<webhook-id>`). */
  | { ok: true; status: 'accepted' | 'duplicate'; storedId?: string; ms: number }
  | { ok: false; httpStatus?: number; code: string; message: string; retryable: boolean; ms: number };

export interface OutgoingMessage {
  chat: number;
  chatKey: string;
  id: string;
  text: string;
}

/**
 * How messages get into the deployment: the HTTP API, or signed generic webhooks
 * (webhook.ts). One call = one delivery attempt, idempotent by the message id.
 */
export interface Transport {
  readonly name: string;
  send(message: OutgoingMessage): Promise<SendOutcome>;
}

export class UnexpectedResponseError extends Error {
  override name = 'UnexpectedResponseError';
  constructor(
    message: string,
    /** The error code the server gave, or the network error's, or UNEXPECTED_BODY. */
    readonly code: string,
  ) {
    super(message);
  }
}

/** Worth the same request again: the server was unavailable or busy, or no answer came. */
function retryable(res: Extract<HttpOutcome, { ok: false }>): boolean {
  return res.status === undefined || res.status === 429 || res.status >= 500;
}

/** One send attempt's HTTP outcome as the run counts it: an ack (with the stored id) or an error. */
export function sendOutcomeOf(res: HttpOutcome): SendOutcome {
  if (!res.ok) {
    return {
      ok: false,
      ...(res.status !== undefined && { httpStatus: res.status }),
      code: res.code,
      message: res.message,
      retryable: retryable(res),
      ms: res.ms,
    };
  }
  const ack = ackSchema.safeParse(res.body);
  if (!ack.success) {
    return {
      ok: false,
      httpStatus: res.status,
      code: 'UNEXPECTED_ACK',
      message: `the deployment answered ${res.status} without an accepted/duplicate status`,
      retryable: false,
      ms: res.ms,
    };
  }
  return {
    ok: true,
    status: ack.data.status,
    ...(ack.data.messageId !== undefined && { storedId: ack.data.messageId }),
    ms: res.ms,
  };
}

export class ChatlaneApi implements Transport {
  readonly name = 'http-api';

  constructor(private readonly http: HttpClient) {}

  async send(message: OutgoingMessage): Promise<SendOutcome> {
    const res = await this.http.request('POST', `/v1/chats/${encodeURIComponent(message.chatKey)}/messages`, {
      id: message.id,
      text: message.text,
      metadata: { userId: `${message.chatKey}-user`, username: 'loadtest' },
    });
    return sendOutcomeOf(res);
  }

  private async get<T extends z.ZodType>(path: string, schema: T): Promise<z.infer<T>> {
    const res = await this.http.request('GET', path);
    if (!res.ok) {
      throw new UnexpectedResponseError(`GET ${path} → ${res.status ?? res.code}: ${res.message}`, res.code);
    }
    const parsed = schema.safeParse(res.body);
    if (!parsed.success) {
      throw new UnexpectedResponseError(
        `GET ${path}: unexpected body (${parsed.error.message})`,
        'UNEXPECTED_BODY',
      );
    }
    return parsed.data;
  }

  private static query(after: string | undefined, limit: number): string {
    return `?limit=${limit}${after ? `&after=${encodeURIComponent(after)}` : ''}`;
  }

  outbox(chatKey: string, after: string | undefined, limit = 1000) {
    return this.get(
      `/v1/chats/${encodeURIComponent(chatKey)}/outbox${ChatlaneApi.query(after, limit)}`,
      pageOf(outboxItemSchema),
    );
  }

  events(chatKey: string, after: string | undefined, limit = 1000) {
    return this.get(
      `/v1/chats/${encodeURIComponent(chatKey)}/events${ChatlaneApi.query(after, limit)}`,
      pageOf(eventSchema),
    );
  }

  messages(chatKey: string) {
    return this.get(`/v1/chats/${encodeURIComponent(chatKey)}/messages`, messagesSchema);
  }

  /** Every archived segment's messages, oldest first (pages of 100). */
  async archive(chatKey: string): Promise<Array<{ kind: string; messages: HistoryMessage[] }>> {
    const out: Array<{ kind: string; messages: HistoryMessage[] }> = [];
    let after: number | null = null;
    for (;;) {
      const page: z.infer<typeof archiveSchema> = await this.get(
        `/v1/chats/${encodeURIComponent(chatKey)}/archive?limit=100${after !== null ? `&after=${after}` : ''}`,
        archiveSchema,
      );
      out.push(...page.items);
      if (page.items.length < 100 || page.next === null || page.next === after) return out;
      after = page.next;
    }
  }
}

const violationSchema = z.looseObject({ chatKey: z.string(), inFlight: z.number(), at: z.number() });
export const mockStatsSchema = z.looseObject({
  requests: z.number(),
  inFlight: z.number(),
  maxInFlightPerChat: z.number(),
  violations: z.array(violationSchema),
  perChat: z.record(z.string(), z.number()),
});
export type MockStats = z.infer<typeof mockStatsSchema>;

/** The mock model's counters, narrowed to one run's chats. */
export async function readMockStats(http: HttpClient, chatKeyPrefix: string): Promise<MockStats> {
  const res = await http.request('GET', `/stats?chatKeyPrefix=${encodeURIComponent(chatKeyPrefix)}`);
  if (!res.ok) {
    throw new UnexpectedResponseError(`mock /stats → ${res.status ?? res.code}: ${res.message}`, res.code);
  }
  const parsed = mockStatsSchema.safeParse(res.body);
  if (!parsed.success) {
    throw new UnexpectedResponseError(
      `mock /stats: unexpected body (${parsed.error.message})`,
      'UNEXPECTED_BODY',
    );
  }
  return parsed.data;
}
