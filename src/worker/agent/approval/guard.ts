import type { Tool, ToolSet } from 'ai';
import { z } from 'zod';
import { FencedOutError } from '../../../shared/errors.js';
import { beginOnce, endOnce, type OnceLimits, type OnceState } from '../../../shared/store/once.js';
import type { OnceTurn } from '../tools/once.js';

/**
 * An approved call runs at most once (docs/approvals.md, "Crashes"): its run is recorded in the
 * chat's once records (store/once.ts, key `chatlane:approval:<id>`) before it starts and its
 * outcome after it ends, both fenced. A turn that finds the outcome shows it instead of running
 * the call again; one that finds only the start (a worker died while the call ran) does not run
 * it again either: the call's outcome is that it was interrupted. A person approved one run.
 */

/** The once key of an approved call: `chatlane:` keys are chatlane's own. */
export function approvalOnceKey(approvalId: string): string {
  return `chatlane:approval:${approvalId}`;
}

/** What the model and the page read of a call whose run was cut by a crash. */
export const INTERRUPTED =
  'The approved call was interrupted (its worker stopped while it ran) and is not run again: it may or may not have taken effect.';

/** An approved call's outcome as the once record keeps it. */
const outcomeSchema = z.union([
  z.object({ error: z.string() }),
  z.object({ ok: z.unknown(), kept: z.literal(false).optional() }),
]);

/** How a call's part ends, known without running it: from its once record. */
export type KnownOutcome = { kind: 'result'; output: unknown } | { kind: 'error'; error: string };

/** The outcome a once record says a call had, or undefined when it never started. */
export function knownOutcome(state: OnceState | undefined): KnownOutcome | undefined {
  if (!state) return undefined;
  if (state.status === 'run') return { kind: 'error', error: INTERRUPTED };
  const json = state.result.json;
  let parsed: z.infer<typeof outcomeSchema> | undefined;
  try {
    parsed = json ? outcomeSchema.parse(JSON.parse(json)) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!parsed) return { kind: 'error', error: 'The approved call ran; its outcome could not be kept.' };
  if ('error' in parsed) return { kind: 'error', error: parsed.error };
  if (parsed.kept === false)
    return { kind: 'result', output: 'The approved call ran; its output was too large to keep.' };
  return { kind: 'result', output: parsed.ok };
}

/** Approved outputs kept per call: beyond it a retried turn says the call ran, without its output. */
const GUARD_MAX_BYTES = 1024 * 1024;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * `tools` with each tool that has an approved call of `approved` (tool call id → approval id)
 * run under the guard for those calls; other calls of the same tool run as they are.
 */
export function guardApproved(
  tools: ToolSet,
  approved: ReadonlyMap<string, { approvalId: string; tool: string }>,
  turn: OnceTurn,
): ToolSet {
  if (approved.size === 0) return tools;
  const names = new Set([...approved.values()].map((a) => a.tool));
  const out: ToolSet = { ...tools };
  for (const name of names) {
    const tool = tools[name];
    if (!tool?.execute) continue;
    out[name] = guarded(tool, approved, turn);
  }
  return out;
}

function guarded(
  tool: Tool,
  approved: ReadonlyMap<string, { approvalId: string; tool: string }>,
  turn: OnceTurn,
): Tool {
  const execute = tool.execute!;
  const limits: OnceLimits = { ...turn.limits, maxBytes: GUARD_MAX_BYTES };
  return {
    ...tool,
    execute: async (input: unknown, options) => {
      const call = approved.get(options.toolCallId);
      if (!call) return execute(input, options);
      const once = { fence: turn.fence, runId: turn.runId, key: approvalOnceKey(call.approvalId) };
      const begun = await beginOnce(turn.store, turn.chatKey, once, limits);
      if (begun.status === 'fenced-out') {
        turn.fencedOut(`approved call guard refused (${call.approvalId})`);
        throw new FencedOutError('once');
      }
      const known = begun.status === 'done' ? knownOutcome(begun) : undefined;
      if (known) {
        if (known.kind === 'error') throw new Error(known.error);
        return known.output;
      }
      if (begun.status === 'run' && begun.attempt > 1) {
        await end(turn, once, limits, { error: INTERRUPTED });
        throw new Error(INTERRUPTED);
      }
      let value: unknown;
      try {
        value = await execute(input, options);
      } catch (err) {
        await end(turn, once, limits, { error: errorText(err) });
        throw err;
      }
      await end(turn, once, limits, { ok: value });
      return value;
    },
  } as Tool;
}

async function end(
  turn: OnceTurn,
  once: { fence: string; runId: string; key: string },
  limits: OnceLimits,
  outcome: { ok: unknown } | { error: string },
): Promise<void> {
  let json = JSON.stringify(outcome) ?? '{"ok":null}';
  if (Buffer.byteLength(json) > limits.maxBytes) json = JSON.stringify({ ok: null, kept: false });
  const ended = await endOnce(turn.store, turn.chatKey, { ...once, json, refused: undefined }, limits);
  if (ended.status === 'fenced-out') {
    turn.fencedOut(`approved call outcome refused (${once.key})`);
    throw new FencedOutError('once');
  }
}
