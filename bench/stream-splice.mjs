// CPU per part of handing on "the parts read so far, then the rest of the stream" (the
// fallback's stream head, src/worker/agent/stream-head.ts), against reading the stream as is.
// Run: node bench/stream-splice.mjs [partsPerStream=2000] [streams=300]
const N = Number(process.argv[2] ?? 2000);
const STREAMS = Number(process.argv[3] ?? 300);

const source = () => {
  let i = 0;
  return new ReadableStream(
    {
      pull(c) {
        if (i++ < N) c.enqueue({ type: 'text-delta', delta: 'x' });
        else c.close();
      },
    },
    { highWaterMark: 0 },
  );
};

// The consumer pipes the stream on, as streamText does.
async function consume(stream) {
  const reader = stream.pipeThrough(new TransformStream()).getReader();
  let n = 0;
  while (!(await reader.read()).done) n++;
  return n;
}

async function readFirst(stream) {
  const reader = stream.getReader();
  const first = await reader.read();
  return { reader, head: [first.value] };
}

const ways = {
  direct: async (s) => s,
  // What stream-head.ts does: a pull source over the original reader.
  pullReader: async (s) => {
    const { reader, head } = await readFirst(s);
    let controller;
    const handOn = (next) => (next.done ? controller.close() : controller.enqueue(next.value));
    return new ReadableStream(
      {
        start(c) {
          controller = c;
          for (const p of head) c.enqueue(p);
        },
        pull: () => reader.read().then(handOn),
        cancel: (reason) => reader.cancel(reason),
      },
      { highWaterMark: 0 },
    );
  },
  pipeIdentity: async (s) => {
    const { reader, head } = await readFirst(s);
    reader.releaseLock();
    return s.pipeThrough(
      new TransformStream({
        start(c) {
          for (const p of head) c.enqueue(p);
        },
      }),
    );
  },
  pipeTransform: async (s) => {
    const { reader, head } = await readFirst(s);
    reader.releaseLock();
    return s.pipeThrough(
      new TransformStream({
        start(c) {
          for (const p of head) c.enqueue(p);
        },
        transform(p, c) {
          c.enqueue(p);
        },
      }),
    );
  },
};

for (let round = 0; round < 5; round++) {
  for (const [name, way] of Object.entries(ways)) {
    const before = process.cpuUsage();
    let parts = 0;
    for (let i = 0; i < STREAMS; i++) parts += await consume(await way(source()));
    const cpu = process.cpuUsage(before);
    const us = cpu.user + cpu.system;
    // Round 0 warms up.
    if (round > 0)
      console.log(`${name.padEnd(14)} ${((us * 1000) / parts).toFixed(0)} ns/part (${parts} parts)`);
  }
}
