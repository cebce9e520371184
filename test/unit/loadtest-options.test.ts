import { describe, expect, it } from 'vitest';
import {
  FLAGS,
  HELP,
  LIMITS,
  type LoadtestOptions,
  parseLoadtestArgs,
  UsageError,
} from '../../src/loadtest/options.js';
import { buildSchedule } from '../../src/loadtest/schedule.js';

function parse(...argv: string[]): LoadtestOptions {
  const opts = parseLoadtestArgs(argv);
  if (opts === 'help') throw new Error('unexpected help');
  return opts;
}

function usageError(...argv: string[]): string {
  try {
    parseLoadtestArgs(argv);
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error(`expected a UsageError for ${argv.join(' ')}`);
}

const URL_ARG = ['--url', 'http://127.0.0.1:3000'];

describe('loadtest flags', () => {
  it('--help documents every flag the parser accepts', () => {
    expect(parseLoadtestArgs(['--help'])).toBe('help');
    expect(parseLoadtestArgs(['-h'])).toBe('help');
    for (const flag of FLAGS) expect(HELP).toContain(`--${flag.name}`);
    // And nothing the parser does not know is advertised.
    const advertised = [...HELP.matchAll(/^ {2}(?:-\w, )?--([a-z-]+)/gm)].map((m) => m[1]);
    expect(advertised.sort()).toEqual(FLAGS.map((f) => f.name).sort());
  });

  it('defaults to a closed loop of min(chats, 50) users with the documented sizes', () => {
    const opts = parse(...URL_ARG);
    expect(opts).toMatchObject({
      mode: 'closed',
      chats: 100,
      messages: 5,
      connections: 50,
      thinkMs: [0, 0],
      burstShare: 0.2,
      burstSize: 3,
      durationS: 60,
      drainS: 60,
      seed: 1,
      maxRequests: 1_000_000,
      json: false,
    });
    expect(opts.url.href).toBe('http://127.0.0.1:3000/');
    expect(parse(...URL_ARG, '--chats', '7').connections).toBe(7);
  });

  it('replies are watched on live streams where the deployment has them, unless told otherwise', () => {
    expect(parse(...URL_ARG)).toMatchObject({ replies: 'auto', maxStreams: 1000 });
    expect(parse(...URL_ARG, '--replies', 'poll', '--max-streams', '5')).toMatchObject({
      replies: 'poll',
      maxStreams: 5,
    });
    expect(usageError(...URL_ARG, '--replies', 'websocket')).toMatch(
      /--replies must be auto, stream or poll/,
    );
    expect(usageError(...URL_ARG, '--max-streams', String(LIMITS.maxStreams + 1))).toMatch(
      /--max-streams must be at most/,
    );
  });

  it('--rate selects the open model; --think takes a fixed value or a range', () => {
    expect(parse(...URL_ARG, '--rate', '250')).toMatchObject({ mode: 'open', rate: 250 });
    expect(parse(...URL_ARG, '--think', '200-800').thinkMs).toEqual([200, 800]);
    expect(parse(...URL_ARG, '--think', '300').thinkMs).toEqual([300, 300]);
  });

  it('the token comes from --token, else from the environment', () => {
    expect(parseLoadtestArgs([...URL_ARG], { apiToken: 'env-secret' })).toMatchObject({
      token: 'env-secret',
    });
    expect(parseLoadtestArgs([...URL_ARG, '--token', 'flag'], { apiToken: 'env' })).toMatchObject({
      token: 'flag',
    });
  });

  it('refuses anything but an absolute http(s) URL without credentials', () => {
    expect(usageError()).toMatch(/--url is required/);
    expect(usageError('--url', 'ftp://example.com')).toMatch(/only http and https/);
    expect(usageError('--url', 'file:///etc/passwd')).toMatch(/only http and https/);
    expect(usageError('--url', 'localhost:3000/x')).toMatch(/only http and https|not an absolute URL/);
    expect(usageError('--url', '/v1/chats')).toMatch(/not an absolute URL/);
    expect(usageError('--url', 'http://u:p@127.0.0.1:3000')).toMatch(/no credentials/);
    expect(usageError('--url', 'http://127.0.0.1:3000/?x=1')).toMatch(/no query/);
    expect(usageError(...URL_ARG, '--mock-url', 'redis://127.0.0.1:6379')).toMatch(/--mock-url: only http/);
    expect(parse('--url', 'https://chat.example.com/base').url.pathname).toBe('/base');
    expect(parse(...URL_ARG, '--mock-url', 'http://127.0.0.1:4010/v1').mockUrl?.href).toBe(
      'http://127.0.0.1:4010/',
    );
  });

  it('enforces the hard caps on size, time and requests', () => {
    expect(usageError(...URL_ARG, '--chats', String(LIMITS.chats + 1))).toMatch(/--chats must be at most/);
    expect(usageError(...URL_ARG, '--chats', '10000', '--messages', '1000')).toMatch(/at most 1000000/);
    expect(usageError(...URL_ARG, '--duration', '3601')).toMatch(/--duration must be at most 3600/);
    expect(usageError(...URL_ARG, '--drain', '601')).toMatch(/--drain must be at most 600/);
    expect(usageError(...URL_ARG, '--max-requests', '10000001')).toMatch(/--max-requests must be at most/);
    expect(usageError(...URL_ARG, '--max-inflight', '0')).toMatch(/--max-inflight must be at least 1/);
  });

  it('rejects malformed and contradictory flags', () => {
    expect(usageError(...URL_ARG, '--rate', '10', '--connections', '5')).toMatch(/exclude each other/);
    expect(usageError(...URL_ARG, '--chats', 'many')).toMatch(/--chats must be a number/);
    expect(usageError(...URL_ARG, '--chats', '1.5')).toMatch(/whole number/);
    expect(usageError(...URL_ARG, '--bursts', '1.5')).toMatch(/--bursts must be at most 1/);
    expect(usageError(...URL_ARG, '--think', '9-3')).toMatch(/--think/);
    expect(usageError(...URL_ARG, '--run-id', 'has space')).toMatch(/--run-id/);
    expect(usageError(...URL_ARG, '--progress', 'loud')).toMatch(/--progress/);
    expect(usageError(...URL_ARG, '--bogus')).toMatch(/bogus/);
    expect(usageError(...URL_ARG, 'stray')).toMatch(/stray|positional/i);
  });
});

describe('loadtest schedule', () => {
  const base = parse(...URL_ARG, '--chats', '300', '--messages', '8', '--rate', '200', '--bursts', '0.3');

  it('is the same for the same seed and differs for another seed', () => {
    const a = buildSchedule(base);
    const b = buildSchedule({ ...base });
    expect(JSON.stringify(b)).toBe(JSON.stringify(a));
    expect(JSON.stringify(buildSchedule({ ...base, seed: 2 }))).not.toBe(JSON.stringify(a));
    const closed = { ...base, mode: 'closed' as const, thinkMs: [100, 900] as [number, number] };
    expect(JSON.stringify(buildSchedule(closed))).toBe(JSON.stringify(buildSchedule({ ...closed })));
  });

  it('plans every message of every chat exactly once, in order, in steps of 1 or a burst', () => {
    const s = buildSchedule(base);
    expect(s.messages).toBe(2400);
    for (const steps of s.chats) {
      let next = 0;
      for (const step of steps) {
        expect(step.first).toBe(next);
        expect(step.count === 1 || (step.count >= 2 && step.count <= base.burstSize)).toBe(true);
        expect(step.offsetsMs).toHaveLength(step.count);
        expect(Math.max(...step.offsetsMs)).toBeLessThanOrEqual(base.burstWindowMs);
        next += step.count;
      }
      expect(next).toBe(8);
    }
    // About 30 % of the steps that could be bursts are.
    const share = s.bursts / s.steps;
    expect(share).toBeGreaterThan(0.1);
    expect(share).toBeLessThan(0.4);
  });

  it('open model: arrivals keep each chat in order and average the requested rate', () => {
    const s = buildSchedule(base);
    expect(s.arrivals).toHaveLength(s.steps);
    const seen = new Array<number>(base.chats).fill(0);
    let last = 0;
    for (const a of s.arrivals) {
      expect(a.atMs).toBeGreaterThanOrEqual(last);
      last = a.atMs;
      expect(a.step).toBe(seen[a.chat]);
      seen[a.chat]!++;
    }
    const rate = s.messages / (s.lastArrivalMs / 1000);
    expect(rate).toBeGreaterThan(180);
    expect(rate).toBeLessThan(220);
  });

  it('closed loop: think time before every step but the first, within the range', () => {
    const s = buildSchedule({ ...base, mode: 'closed', thinkMs: [100, 900] });
    expect(s.arrivals).toEqual([]);
    for (const steps of s.chats) {
      expect(steps[0]!.thinkMs).toBe(0);
      for (const step of steps.slice(1)) {
        expect(step.thinkMs).toBeGreaterThanOrEqual(100);
        expect(step.thinkMs).toBeLessThanOrEqual(900);
      }
    }
  });
});
