import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type CallFrame, ownerOf } from './lib/profile-frames.js';

/**
 * Reads what bench/memory-probe.ts wrote, as text tables (run with a big heap for snapshots:
 * `NODE_OPTIONS=--max-old-space-size=12000`):
 *
 *   tsx bench/memory-report.ts heap IDLE.heapsnapshot BUSY.heapsnapshot --per 2000 [--by type|shape|string]
 *     live bytes per parked turn: (busy − idle) ÷ per, by node type and name (type), by object
 *     property signature (shape) or by the first 60 characters of strings (string)
 *   tsx bench/memory-report.ts promoted|allocated FILE.json --per 4000
 *     promoted KiB per turn by the allocating function's package, by the innermost chatlane
 *     frame on the stack, by allocating function (the line is the function's first)
 *   tsx bench/memory-report.ts gc FILE.json
 *     each major GC and the highest-RSS sample: how far the old space grew in between, and the
 *     external memory that is not ArrayBuffers (C++ memory held by JS objects) as the median
 *     over the samples: at and just after a major GC, `external` still counts the ArrayBuffers
 *     that GC has freed (V8 subtracts them from its counter only when its background sweep of
 *     them ends, while `arrayBuffers` drops as each is freed), so there external − arrayBuffers
 *     shows freed ArrayBuffers, not native memory (with `--single-threaded-gc` the gap is gone)
 */

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    per: { type: 'string', default: '1' },
    by: { type: 'string', default: 'type' },
    top: { type: 'string', default: '30' },
  },
});
const per = Number(values.per);
const top = Number(values.top);

interface Snapshot {
  snapshot: {
    meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

type Tally = Map<string, { count: number; bytes: number }>;

function add(tally: Tally, key: string, bytes: number): void {
  const t = tally.get(key) ?? { count: 0, bytes: 0 };
  t.count++;
  t.bytes += bytes;
  tally.set(key, t);
}

/** Every node of a snapshot under a key of `by`, with its self size. */
function tallySnapshot(file: string, by: string): Tally {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const { node_fields, node_types, edge_fields, edge_types } = s.snapshot.meta;
  const nf = node_fields.length;
  const ef = edge_fields.length;
  const [type, name, size, edgeCount] = ['type', 'name', 'self_size', 'edge_count'].map((f) =>
    node_fields.indexOf(f),
  ) as [number, number, number, number];
  const [edgeType, edgeName] = [edge_fields.indexOf('type'), edge_fields.indexOf('name_or_index')];
  const tally: Tally = new Map();
  let edge = 0;
  for (let i = 0; i < s.nodes.length; i += nf) {
    const t = node_types[0][s.nodes[i + type]!]!;
    const n = s.strings[s.nodes[i + name]!]!;
    const edges = s.nodes[i + edgeCount]!;
    const isString = t.includes('string');
    let key: string;
    if (by === 'string') {
      key = isString ? `${t} | ${n.slice(0, 60).replace(/\n/g, '\\n').replace(/[0-9]/g, '#')}` : '';
    } else if (by === 'shape' && (t === 'object' || t === 'closure') && !n.startsWith('system /')) {
      const props: string[] = [];
      for (let k = 0; k < edges && props.length < 8; k++) {
        const e = edge + k * ef;
        if (edge_types[0][s.edges[e + edgeType]!] === 'property')
          props.push(s.strings[s.edges[e + edgeName]!]!);
      }
      key = `${t}:${n} {${props.join(',')}}`;
    } else {
      key = `${t}:${isString ? '' : n.slice(0, 60)}`;
    }
    if (key) add(tally, key, s.nodes[i + size]!);
    edge += edges * ef;
  }
  return tally;
}

function heapReport(idleFile: string, busyFile: string): void {
  const idle = tallySnapshot(idleFile, values.by!);
  const busy = tallySnapshot(busyFile, values.by!);
  const total = (t: Tally) => [...t.values()].reduce((a, v) => a + v.bytes, 0);
  console.log(
    `self size: idle ${(total(idle) / 1e6).toFixed(1)} MB, busy ${(total(busy) / 1e6).toFixed(1)} MB, ` +
      `${((total(busy) - total(idle)) / per / 1024).toFixed(2)} KiB per parked turn`,
  );
  const rows = [...busy].map(([key, b]) => {
    const a = idle.get(key) ?? { count: 0, bytes: 0 };
    return { key, bytes: (b.bytes - a.bytes) / per, count: (b.count - a.count) / per };
  });
  rows.sort((x, y) => y.bytes - x.bytes);
  for (const r of rows.slice(0, top)) {
    console.log(
      `${r.bytes.toFixed(0).padStart(8)} B ${r.count.toFixed(2).padStart(8)}/turn  ${r.key.slice(0, 150)}`,
    );
  }
}

interface ProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children?: ProfileNode[];
}

function promotedReport(file: string, what: string): void {
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: ProfileNode };
  const ours = (f: CallFrame) => ownerOf(f).startsWith('chatlane:') || f.url.endsWith('bare-loop.mjs');
  const frame = (f: CallFrame) => `${f.functionName || '(anonymous)'} ${ownerOf(f)}:${f.lineNumber + 1}`;
  const byOwner = new Map<string, number>();
  const byOurs = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  const bump = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
  const walk = (node: ProfileNode, stack: CallFrame[]) => {
    const here = [...stack, node.callFrame];
    if (node.selfSize > 0) {
      total += node.selfSize;
      bump(byOwner, ownerOf(node.callFrame), node.selfSize);
      bump(byFunction, frame(node.callFrame), node.selfSize);
      // Only the synchronous stack is recorded: after an await, no chatlane frame may be on it.
      const caller = here.findLast(ours);
      bump(byOurs, caller ? frame(caller) : '(no chatlane frame on the stack)', node.selfSize);
    }
    for (const c of node.children ?? []) walk(c, here);
  };
  walk(head, []);
  const kib = (bytes: number) => (bytes / per / 1024).toFixed(1).padStart(8);
  console.log(`${what}: ${(total / 1e6).toFixed(1)} MB = ${kib(total).trim()} KiB per turn`);
  for (const [title, m] of [
    ['by package of the allocating function', byOwner],
    ['by innermost chatlane frame', byOurs],
    ['by allocating function', byFunction],
  ] as const) {
    console.log(`-- ${title}`);
    for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${kib(v)} KiB  ${k}`);
  }
}

interface GcSample {
  at: string;
  ms: number;
  rssMb: number;
  heapTotalMb: number;
  heapUsedMb: number;
  externalMb: number;
  arrayBuffersMb: number;
  oldSpaceMb: number;
  oldUsedMb: number;
}

function gcReport(file: string): void {
  const samples = JSON.parse(readFileSync(file, 'utf8')) as GcSample[];
  const peak = samples.reduce((a, b) => (b.rssMb > a.rssMb ? b : a));
  let before: GcSample | undefined;
  console.log(
    'at        ms    rss heapTotal heapUsed external arrayBuf oldSpace oldUsed  (old used before → after)',
  );
  for (const s of samples) {
    if (s.at === 'major-gc' || s === peak) {
      const grew = before ? `  (${before.oldUsedMb} → ${s.oldUsedMb})` : '';
      console.log(
        `${(s === peak ? 'PEAK ' : '') + s.at}`.padEnd(14) +
          [
            s.ms,
            s.rssMb,
            s.heapTotalMb,
            s.heapUsedMb,
            s.externalMb,
            s.arrayBuffersMb,
            s.oldSpaceMb,
            s.oldUsedMb,
          ]
            .map((v) => String(v).padStart(8))
            .join('') +
          grew,
      );
    }
    if (s.at === 'timer') before = s;
  }
  const native = samples.map((s) => s.externalMb - s.arrayBuffersMb).sort((x, y) => x - y);
  console.log(
    `external − arrayBuffers: median ${native[native.length >> 1]} MB, max ${native.at(-1)} MB` +
      ' (the max at or just after a major GC is ArrayBuffers it freed, not native memory)',
  );
}

const [mode, a, b] = positionals;
if (mode === 'heap' && a && b) heapReport(a, b);
else if ((mode === 'promoted' || mode === 'allocated') && a) promotedReport(a, mode);
else if (mode === 'gc' && a) gcReport(a);
else
  throw new Error(
    'usage: memory-report.ts heap IDLE BUSY --per N [--by type|shape|string] | promoted|allocated FILE --per N | gc FILE',
  );
