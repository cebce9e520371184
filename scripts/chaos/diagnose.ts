import type { Cluster, Redis } from 'ioredis';
import type { ChatState } from '../../src/loadtest/chat-state.js';
import { createQueue, QUEUES } from '../../src/shared/jobs.js';
import { chatKeys } from '../../src/shared/keys.js';
import { fieldsOf } from '../../src/shared/store/records.js';

/**
 * One chat as the deployment holds it and as the load test saw it, in a few lines: what a
 * failed chaos or failover check needs to be explained from a CI log alone (the processes'
 * logs are long gone by then). Ids only, no message text. Never throws: a read that fails
 * prints its error.
 */

type Json = Record<string, unknown>;

const short = (id: string | undefined) => id ?? '-';
/** Run ids are UUIDs: their first 8 characters tell a chat's few runs apart. */
const run = (id: unknown) => String(id ?? '?').slice(0, 8);

function parse(raw: string): Json {
  try {
    return JSON.parse(raw) as Json;
  } catch {
    return {};
  }
}

/** An assistant message's tool calls with their outcome: `{chat_send:output-error(why)}`. */
function toolsOf(m: Json): string {
  const parts = Array.isArray(m.parts) ? (m.parts as Json[]) : [];
  const tools = parts
    .filter((p) => typeof p.type === 'string' && p.type.startsWith('tool-'))
    .map((p) => {
      const why = typeof p.errorText === 'string' ? `(${p.errorText.slice(0, 80)})` : '';
      return `${String(p.type).slice(5)}:${String(p.state)}${why}`;
    });
  return tools.length > 0 ? `{${tools.join(',')}}` : '';
}

async function read<T>(what: string, fn: () => Promise<T>, show: (v: T) => string): Promise<string> {
  try {
    return `${what}: ${show(await fn())}`;
  } catch (err) {
    return `${what}: (read failed: ${(err as Error).message})`;
  }
}

export async function diagnoseChat(
  redis: Redis | Cluster,
  prefix: string,
  chat: Pick<
    ChatState,
    'key' | 'messages' | 'outbox' | 'deliveries' | 'commits' | 'outboxCursor' | 'eventsCursor'
  >,
): Promise<string[]> {
  const k = chatKeys(prefix, chat.key);
  const lines = [`chat ${chat.key}`];
  const acked = chat.messages
    .filter((m) => m.outcome === 'accepted' || m.outcome === 'duplicate')
    .map((m) => `${m.storedId ?? m.id}@${m.ackAt ?? '?'}`);
  lines.push(`  load test: acked ${acked.join(' ')}`);
  lines.push(
    `  load test: commits ${chat.commits.map((c) => `${run(c.runId)}(${c.consumed})@${c.ts}`).join(' ')}; cursors outbox ${short(chat.outboxCursor)} events ${short(chat.eventsCursor)}`,
  );
  lines.push(
    `  load test: outbox seen ${[...chat.outbox.values()].map((o) => `${o.id}:${run(o.runId)}${chat.deliveries.has(o.id) ? '+d' : ''}`).join(' ')}; delivered ${[...chat.deliveries.keys()].join(' ')}`,
  );
  lines.push(
    `  ${await read(
      'history',
      () => redis.lrange(k.hist, 0, -1),
      (list) =>
        list
          .map(parse)
          .map((m) => {
            const meta = (m.metadata ?? {}) as Json;
            return m.role === 'assistant'
              ? `a:${run(meta.runId)}${toolsOf(m)}`
              : `${String(m.role)}:${String(m.id)}`;
          })
          .join(' '),
    )}`,
  );
  // Each stream entry as `<id>:<what it says>`.
  const stream = (what: string, key: string, show: (fields: Map<string, string>) => string) =>
    read(
      what,
      () => redis.xrange(key, '-', '+'),
      (entries) => entries.map(([id, f]) => `${id}:${show(fieldsOf(f))}`).join(' ') || 'empty',
    );
  lines.push(`  ${await stream('inbox', k.inbox, (f) => String(f.get('id')))}`);
  lines.push(`  ${await stream('outbox', k.outbox, (f) => run(f.get('runId')))}`);
  lines.push(
    `  ${await stream('events', k.events, (e) => {
      const d = parse(e.get('data') ?? '{}');
      const ids = Array.isArray(d.messageIds) ? `[${d.messageIds.join(',')}]` : '';
      return `${String(e.get('type'))}${d.runId ? `:${run(d.runId)}` : ''}${ids}${d.reason ? `:${String(d.reason)}` : ''}`;
    })}`,
  );
  lines.push(
    `  ${await read(
      'meta',
      () => redis.hmget(k.meta, 'deliveredTo', 'fence', 'turns', 'owner', 'leaseUntil'),
      ([deliveredTo, fence, turns, owner, leaseUntil]) =>
        `deliveredTo ${deliveredTo} fence ${fence} turns ${turns} owner ${owner} leaseUntil ${leaseUntil}`,
    )}`,
  );
  lines.push(
    `  ${await read(
      'turn job',
      () => turnJobOf(redis, prefix, chat.key),
      (s) => s,
    )}`,
  );
  return lines;
}

/**
 * The chat's turn job as the sweeper sees it (its deduplication key, then the job's state):
 * a chat left pending is re-enqueued only when no job of it is in a live state.
 */
async function turnJobOf(redis: Redis | Cluster, prefix: string, chatKey: string): Promise<string> {
  const turns = createQueue(prefix, QUEUES.turns, redis);
  try {
    const id = await turns.getDeduplicationJobId(chatKey);
    if (!id) return 'none (no deduplication key)';
    const [state, job] = await Promise.all([turns.getJobState(id), turns.getJob(id)]);
    const failed = job?.failedReason ? ` failed "${job.failedReason.slice(0, 80)}"` : '';
    return `${id} ${state} attempts ${job?.attemptsMade ?? '?'} delay ${job?.delay ?? '?'} processedOn ${job?.processedOn ?? '-'}${failed}`;
  } finally {
    await turns.close();
  }
}

/**
 * The failed checks of a load test (with their first examples), then the chats those
 * examples name (at most `max`), each as `diagnoseChat` prints it.
 */
export async function diagnoseFailures(
  redis: Redis | Cluster,
  prefix: string,
  invariants: ReadonlyArray<{ name: string; ok: boolean; violations: number; examples: string[] }>,
  chats: ReadonlyArray<Parameters<typeof diagnoseChat>[2]>,
  max = 3,
): Promise<string[]> {
  const failed = invariants.filter((i) => !i.ok);
  const lines = failed.map((i) => `${i.name} ×${i.violations}: ${i.examples.slice(0, 3).join('; ')}`);
  // An example starts with its chat's key: `<key>: …` or `<key>/<id>: …`.
  const keys = new Set(failed.flatMap((i) => i.examples.map((e) => /^[^:/ ]+/.exec(e)?.[0] ?? '')));
  for (const chat of chats.filter((c) => keys.has(c.key)).slice(0, max)) {
    lines.push(...(await diagnoseChat(redis, prefix, chat)));
  }
  return lines;
}
