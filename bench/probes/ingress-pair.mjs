// `REDIS_URL=… node bench/probes/ingress-pair.mjs NAME=VALUE …` (after `npm run build`): what a
// setting costs the ingress, as JSON. Two `dist/cli.js ingress` processes, one with the default
// environment and one with the given variables, are loaded at the same moment (POST
// /v1/chats/:chatKey/messages, half the connections each), so a neighbour or a CPU frequency
// step weighs on both alike; measured one after the other on this VM the same server swung by
// up to ±50 % between runs. Reports each side's server CPU per message (/proc/<pid>/stat) and
// the variant ÷ default ratio per round, sides swapped each round. Each side uses its own key
// prefix and deletes its keys after.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { median, round1 } from './probe-stats.mjs';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const { Redis } = require('ioredis');

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
// INGRESS_PAIR_SECONDS / _ROUNDS small only prove the script works (test/e2e/bench-probes.test.ts).
const seconds = Number(process.env.INGRESS_PAIR_SECONDS ?? 8);
const rounds = Number(process.env.INGRESS_PAIR_ROUNDS ?? 4);
const connections = Number(process.env.INGRESS_PAIR_CONNECTIONS ?? 50);
const prefixBase = process.env.INGRESS_PAIR_PREFIX ?? `clprobe-pair-${process.pid}`;
const variant = Object.fromEntries(
  process.argv.slice(2).map((arg) => {
    const at = arg.indexOf('=');
    if (at < 1) throw new Error(`expected NAME=VALUE, got ${arg}`);
    return [arg.slice(0, at), arg.slice(at + 1)];
  }),
);
const cli = new URL('../../dist/cli.js', import.meta.url);
const TEXT = 'Hi, could you remind me what we decided about the deployment window for Friday?';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** User + system CPU of a process, in µs (Linux clock ticks are 10 ms). */
function cpuUs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** A port nobody listens on now (the ingress binds it a moment later). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function start(prefix, env) {
  const port = await freePort();
  const child = spawn(process.execPath, [cli.pathname, 'ingress'], {
    env: {
      ...process.env,
      REDIS_URL,
      CHATLANE_PREFIX: prefix,
      LOG_LEVEL: 'warn',
      PORT: String(port),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`ingress exited (${child.exitCode}) before it was ready`);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (i > 200) throw new Error('ingress not ready after 20 s');
    await sleep(100);
  }
  return { child, port, prefix };
}

function load(port, tag, durationS) {
  let n = 0;
  return new Promise((resolve, reject) =>
    autocannon(
      {
        url: `http://127.0.0.1:${port}`,
        connections: Math.max(1, Math.floor(connections / 2)),
        duration: durationS,
        requests: [
          {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            setupRequest: (req) => {
              const i = n++;
              return {
                ...req,
                path: `/v1/chats/probe-chat-${i % 1000}/messages`,
                body: JSON.stringify({ id: `${tag}-${i}`, text: TEXT }),
              };
            },
          },
        ],
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    ),
  );
}

async function deletePrefix(redis, prefix) {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

const redis = new Redis(REDIS_URL);
const perRound = [];
try {
  for (let round = 0; round < rounds; round++) {
    const sides = [
      { name: 'default', env: {} },
      { name: 'variant', env: variant },
    ];
    if (round % 2 === 1) sides.reverse();
    const servers = [];
    try {
      for (const side of sides)
        servers.push({ side, ...(await start(`${prefixBase}-${round}-${side.name}`, side.env)) });
      await Promise.all(servers.map((s) => load(s.port, `${s.prefix}-w`, Math.min(2, seconds))));
      const before = servers.map((s) => cpuUs(s.child.pid));
      const results = await Promise.all(servers.map((s) => load(s.port, `${s.prefix}-m`, seconds)));
      const row = {};
      servers.forEach((s, i) => {
        row[s.side.name] = {
          reqPerSec: Math.round(results[i].requests.average),
          cpuUsPerMessage: round1((cpuUs(s.child.pid) - before[i]) / results[i].requests.total),
          non2xx: results[i].non2xx,
        };
      });
      row.cpuRatio = Math.round((row.variant.cpuUsPerMessage / row.default.cpuUsPerMessage) * 1000) / 1000;
      perRound.push(row);
    } finally {
      for (const s of servers) {
        s.child.kill('SIGTERM');
        if (s.child.exitCode === null) await new Promise((r) => s.child.once('exit', r));
        await deletePrefix(redis, s.prefix);
      }
    }
    await sleep(200);
  }
} finally {
  redis.disconnect();
}

process.stdout.write(
  `${JSON.stringify(
    {
      variant,
      seconds,
      connections,
      rounds: perRound,
      median: {
        defaultCpuUsPerMessage: median(perRound.map((r) => r.default.cpuUsPerMessage)),
        variantCpuUsPerMessage: median(perRound.map((r) => r.variant.cpuUsPerMessage)),
        cpuRatio: median(perRound.map((r) => r.cpuRatio)),
      },
    },
    null,
    2,
  )}\n`,
);
