import type { Queue } from 'bullmq';
import type { ResolveAll } from '../shared/address-policy.js';
import type { ReplyRoute } from '../shared/delivery/route.js';
import {
  DEFAULT_FILE_POLICY,
  type FilePolicy,
  messageFileHostProblem,
  messageFileProblem,
} from '../shared/file-parts.js';
import { enqueueTurn, type TurnJob } from '../shared/jobs.js';
import { laneArrivalsChannel } from '../shared/keys.js';
import { debounceDelay } from '../shared/lane-debounce.js';
import { type LanePolicies, MERGE_ONLY } from '../shared/lane-policy.js';
import type { ChatMessage } from '../shared/messages.js';
import { ReplicationTimeoutError, type WriteMark } from '../shared/replica-acks.js';
import type { ChatStore } from '../shared/store/chat-store.js';
import { REPLY_WATCH_MS } from '../shared/store/reply-streams.js';
import { inSpan, traceparent } from '../shared/tracing/spans.js';
import { ActivityIndex } from './activity.js';
import type { ContactTracker } from './contacts.js';
import { HttpError } from './errors.js';
import { withRedis } from './validation.js';

/**
 * The one ingest every entry point calls (HTTP API, signed generic webhooks, platform
 * webhooks, Telegram polling): store the user message once, remember where the chat's
 * replies go, and make sure the chat gets a turn.
 *
 *   ingest.lua (idempotent on message.id; writes the reply route iff it changed; with the
 *     message's lane policy, says whether a turn runs and tells it — interrupt)
 *   → enqueue the chat's turn (deduplicated by chatKey; delayed while an idle chat's burst
 *     settles — debounce, lane-debounce.ts)
 *   → activity index (at most once a second per chat and process)
 *   → contact book, when the message has a username (at most once a minute per name and chat)
 *
 * File parts are checked first (`FilePolicy`: https: or size-capped data: URLs, allowed
 * media types, then a public host by the address policy, names resolved); a refused one is a
 * 400 (FILE_URL_NOT_ALLOWED, FILE_TYPE_NOT_ALLOWED, FILE_TOO_LARGE) and nothing is written.
 *
 * Resolves only once the message is in Redis: a caller that answers 2xx after it has kept
 * its promise to the sender. Throws `HttpError` with the registry's code:
 * CHAT_FULL (429) when the chat already holds MAX_PENDING_PER_CHAT messages,
 * REDIS_UNAVAILABLE (503) when Redis cannot be reached (the sender should retry; the id
 * makes the retry safe), REPLICATION_TIMEOUT (503) when REDIS_REPLICA_ACKS replicas did not
 * confirm the write in time (the same retry).
 */
export interface IngestRequest {
  chatKey: string;
  /** A user UIMessage; its `id` is the idempotency key (platform message id, webhook-id, ...). */
  message: ChatMessage;
  /** Where replies go; omitted (HTTP API) leaves the chat's route as it is. */
  route?: ReplyRoute;
  /** The sender waits for the reply (POST /v1/ui): the chat is marked watched with the message. */
  watched?: boolean;
}

export interface IngestResult {
  status: 'accepted' | 'duplicate';
  messageId: string;
}

export type Ingest = (request: IngestRequest) => Promise<IngestResult>;

export interface IngestDeps {
  store: ChatStore;
  turns: Queue<TurnJob>;
  limits: { maxPendingPerChat: number; dedupWindowMs: number };
  /** Shared by every entry point of a process so its once-a-second throttle holds. */
  activity?: ActivityIndex;
  /** Contact book upserts (absent: no contact book). */
  contacts?: ContactTracker;
  /** Which file parts are accepted (default: DEFAULT_FILE_POLICY). */
  files?: FilePolicy;
  /** How file hosts are resolved for the address policy (default: the system resolver). */
  resolve?: ResolveAll;
  /** Lane policies by channel (LANE_*, docs/lane-policies.md); default: merge, no debounce. */
  lanes?: LanePolicies;
}

const isFilePart = (part: { type: string }) => part.type === 'file';

async function confirmReplicated(store: ChatStore, mark: WriteMark): Promise<void> {
  try {
    await store.confirmWrite(mark);
  } catch (err) {
    if (!(err instanceof ReplicationTimeoutError)) throw err;
    throw new HttpError(
      'REPLICATION_TIMEOUT',
      'the message is stored but not yet confirmed on enough Redis replicas; retry with the same id',
      { cause: err },
    );
  }
}

export function createIngest(deps: IngestDeps): Ingest {
  const { store, turns } = deps;
  const activity = deps.activity ?? new ActivityIndex(store);
  const contacts = deps.contacts;
  const limits = { maxPending: deps.limits.maxPendingPerChat, dedupWindowMs: deps.limits.dedupWindowMs };

  const files = deps.files ?? DEFAULT_FILE_POLICY;
  const lanes = deps.lanes ?? MERGE_ONLY;

  const ingest: Ingest = async ({ chatKey, message, route, watched }) => {
    // Host names are resolved only for messages with file parts: most have none, and an
    // await less per message counts at thousands a second (bench --only ingress).
    const problem =
      messageFileProblem(message.parts, files) ??
      (message.parts.some(isFilePart)
        ? await messageFileHostProblem(message.parts, deps.resolve)
        : undefined);
    if (problem) throw new HttpError(problem.code, problem.message);
    // One withRedis around every Redis step: the same error mapping, one async frame a message.
    return withRedis(() => storeMessage(chatKey, message, route, watched === true));
  };

  const storeMessage = async (
    chatKey: string,
    message: ChatMessage,
    route: ReplyRoute | undefined,
    watched: boolean,
  ): Promise<IngestResult> => {
    const mark = store.markWrite(chatKey);
    const lane = lanes.of(message.metadata);
    const result = await store.ingest(chatKey, message, limits, route, {
      state: lane.debounceMs > 0,
      ...(lane.policy === 'interrupt' &&
        lane.maxInterrupts > 0 && {
          notify: {
            channel: laneArrivalsChannel(store.prefix, chatKey),
            maxInterrupts: lane.maxInterrupts,
          },
        }),
      ...(watched && { watchMs: REPLY_WATCH_MS }),
    });
    if (result.status === 'full') {
      throw new HttpError('CHAT_FULL', `chat already has ${result.pending} pending messages; retry later`);
    }
    // An idle chat's turn waits out the burst (a duplicate's does not: its message waited already).
    const delayMs = result.status === 'accepted' ? debounceDelay(lane, result.lane) : 0;
    // A duplicate enqueues too: if an earlier attempt stored the message but failed to
    // enqueue, the sender's retry is what gets the chat its turn.
    await Promise.all([
      enqueueTurn(turns, chatKey, delayMs),
      activity.touch(chatKey),
      // A duplicate is a message seen before: nothing new to learn about its sender.
      result.status === 'accepted' && contacts ? contacts.touch(chatKey, message) : undefined,
    ]);
    // REDIS_REPLICA_ACKS: the 2xx promises the message survives a failover. One WAIT after
    // the enqueue covers it too (same connection); a duplicate waits as well, since the
    // earlier attempt may have been answered 503 before its write reached the replicas.
    if (mark) await confirmReplicated(store, mark);
    return { status: result.status, messageId: message.id };
  };
  // The ingest span is the message's place in its trace: its traceparent is stored with the
  // message, and the turn that consumes it links to it.
  return (request) =>
    inSpan(
      'chatlane.ingest',
      { attributes: { 'chatlane.chat_key': request.chatKey, 'chatlane.message_id': request.message.id } },
      (span) => {
        const tp = span && traceparent(span);
        if (!tp) return ingest(request);
        const { message } = request;
        return ingest({
          ...request,
          message: { ...message, metadata: { ...message.metadata, traceparent: tp } },
        });
      },
    );
}
