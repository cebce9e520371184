import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type CallFrame, ownerOf } from './profile-frames.js';

/**
 * `tsx bench/lib/profile-summary.ts <file.cpuprofile> [--top N]`: where a worker's CPU went, as
 * JSON — self time per package (node_modules/<pkg>, chatlane's own files, node internals, GC)
 * and the top functions by self time and by inclusive time. Reads the profiles that
 * `bench/run.ts --only overhead --profile DIR` writes.
 */

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function summarize(profile: CpuProfile, top: number) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idleUs = [...selfUs.entries()]
    .filter(([id]) => byId.get(id)?.callFrame.functionName === '(idle)')
    .reduce((a, [, us]) => a + us, 0);
  const busyUs = totalUs - idleUs;

  const byOwner = new Map<string, number>();
  const byFn = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === '(idle)') continue;
    const owner = ownerOf(node.callFrame);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + us);
    const fn = `${node.callFrame.functionName || '(anonymous)'} ${owner}:${node.callFrame.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    // Inclusive time: every distinct frame on the stack gets the sample once.
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)!.callFrame;
      const key = `${f.functionName || '(anonymous)'} ${ownerOf(f)}:${f.lineNumber + 1}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    }
  }
  const pct = (us: number) => Math.round((us / busyUs) * 1000) / 10;
  const rank = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: Math.round(us / 1000), pctOfBusy: pct(us) }));
  return {
    wallMs: Math.round((profile.endTime - profile.startTime) / 1000),
    busyMs: Math.round(busyUs / 1000),
    selfByOwner: rank(byOwner),
    selfByFunction: rank(byFn),
    inclusiveByFunction: rank(inclusive),
  };
}

const { values, positionals } = parseArgs({
  options: { top: { type: 'string', default: '30' } },
  allowPositionals: true,
});
const file = positionals[0];
if (!file) {
  process.stderr.write('usage: tsx bench/lib/profile-summary.ts <file.cpuprofile> [--top N]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
process.stdout.write(`${JSON.stringify(summarize(profile, Number(values.top)), null, 2)}\n`);
