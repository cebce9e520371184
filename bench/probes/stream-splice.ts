/**
 * CPU per part of the fallback's stream head (src/worker/agent/stream/stream-head.ts: the parts read
 * so far, then the rest pulled from the original reader) against reading the stream as is, and
 * against the alternative of a pipeThrough stage. Not part of bench/run.ts: a micro-benchmark.
 *
 *   npx tsx bench/probes/stream-splice.ts [partsPerStream=2000] [streams=300]
 */
import { readStreamHead } from '../../src/worker/agent/stream/stream-head.js';

type Part = { type: string; delta?: string };

const N = Number(process.argv[2] ?? 2000);
const STREAMS = Number(process.argv[3] ?? 300);

function source(): ReadableStream<Part> {
  let i = 0;
  return new ReadableStream<Part>(
    {
      pull(c) {
        if (i++ < N) c.enqueue({ type: 'text-delta', delta: 'x' });
        else c.close();
      },
    },
    { highWaterMark: 0 },
  );
}

/** Read to the end through one more stage, as streamText pipes a model's stream on. */
async function consume(stream: ReadableStream<Part>): Promise<number> {
  const reader = stream.pipeThrough(new TransformStream<Part, Part>()).getReader();
  let n = 0;
  while (!(await reader.read()).done) n++;
  return n;
}

/** The first part read off, then the rest handed on through a pipeThrough stage. */
async function piped(stream: ReadableStream<Part>, transform: boolean): Promise<ReadableStream<Part>> {
  const reader = stream.getReader();
  const first = await reader.read();
  reader.releaseLock();
  return stream.pipeThrough(
    new TransformStream<Part, Part>({
      start(c) {
        if (!first.done) c.enqueue(first.value);
      },
      ...(transform && { transform: (p, c) => c.enqueue(p) }),
    }),
  );
}

const ways: Record<string, (s: ReadableStream<Part>) => Promise<ReadableStream<Part>>> = {
  direct: async (s) => s,
  streamHead: async (s) => (await readStreamHead(s)).stream,
  pipeIdentity: (s) => piped(s, false),
  pipeTransform: (s) => piped(s, true),
};

for (let round = 0; round < 5; round++) {
  for (const [name, way] of Object.entries(ways)) {
    const before = process.cpuUsage();
    let parts = 0;
    for (let i = 0; i < STREAMS; i++) parts += await consume(await way(source()));
    const cpu = process.cpuUsage(before);
    // Round 0 warms up.
    if (round > 0)
      console.log(
        `${name.padEnd(14)} ${(((cpu.user + cpu.system) * 1000) / parts).toFixed(0)} ns/part (${parts} parts)`,
      );
  }
}
