import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { configSchema } from '../../src/shared/config.js';

/**
 * Static checks of the container setup. There is no Docker engine in CI, so the compose
 * file and Dockerfile are verified by parsing them.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const composeText = readFileSync(`${root}docker-compose.yml`, 'utf8');
const dockerfileText = readFileSync(`${root}Dockerfile`, 'utf8');
const exampleText = readFileSync(`${root}.env.example`, 'utf8');

/** Platform variables are read by the platform modules, not the config schema (src/shared/platforms). */
const PLATFORM_VARIABLES = /^(TELEGRAM|SLACK|WHATSAPP|DISCORD|TEAMS|GCHAT)_/;

/** Roles `node dist/cli.js <role>` accepts. Kept here on purpose, not imported. */
const CLI_ROLES = ['ingress', 'worker', 'compactor', 'delivery', 'all', 'mock-llm'];

const APP_SERVICES = ['ingress', 'worker', 'compactor', 'delivery', 'mock-llm'] as const;
const REDIS_CLIENTS = ['ingress', 'worker', 'compactor', 'delivery'] as const;
/** Services that only start with `--profile <name>`. */
const OPTIONAL = { 'mock-llm': 'mock', delivery: 'delivery' } as Record<string, string>;

interface Healthcheck {
  test?: string | string[];
}

interface Service {
  image?: string;
  build?: unknown;
  command?: string | string[];
  entrypoint?: unknown;
  environment?: Record<string, string | number | boolean | null> | string[];
  env_file?: Array<{ path: string; required?: boolean }>;
  ports?: unknown[];
  depends_on?: Record<string, { condition?: string }> | string[];
  healthcheck?: Healthcheck;
  deploy?: { replicas?: number };
  profiles?: string[];
  restart?: string;
  container_name?: string;
  stop_grace_period?: string;
}

interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

// Compose resolves `<<: *anchor` merge keys; YAML 1.2 needs them switched on explicitly.
const compose = parse(composeText, { merge: true }) as ComposeFile;

function service(name: string): Service {
  const s = compose.services[name];
  if (!s) throw new Error(`service ${name} missing from docker-compose.yml`);
  return s;
}

function healthcheckText(s: Service): string {
  const test = s.healthcheck?.test;
  return Array.isArray(test) ? test.join(' ') : (test ?? '');
}

function env(s: Service): Record<string, string> {
  const e = s.environment ?? {};
  if (Array.isArray(e)) {
    return Object.fromEntries(e.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(e).map(([k, v]) => [k, String(v ?? '')]));
}

/** A .env file's variables (`KEY=value` lines; comments and blank lines skipped). */
function envFileOf(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    if (m) vars[m[1]!] = m[2]!;
  }
  return vars;
}

/** Compose's interpolation of `${NAME}` and `${NAME:-default}` from the .env file's variables. */
function interpolate(value: string, dotenv: Record<string, string>): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, name: string, def?: string) =>
    dotenv[name] ? dotenv[name] : (def ?? ''),
  );
}

/**
 * A service's environment as compose builds it with `dotenv` as the project's .env: the
 * env_file's variables, then `environment`, interpolated, on top (compose's precedence).
 */
function renderedEnv(name: string, dotenv: Record<string, string>): Record<string, string> {
  const s = service(name);
  const fromFile = (s.env_file ?? []).some((f) => f.path === '.env') ? dotenv : {};
  const own = Object.fromEntries(Object.entries(env(s)).map(([k, v]) => [k, interpolate(v, dotenv)]));
  return { ...fromFile, ...own };
}

function durationSeconds(d: string): number {
  const m = /^(\d+)(ms|s|m)$/.exec(d);
  if (!m) throw new Error(`unsupported duration ${d}`);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n / 1000 : m[2] === 'm' ? n * 60 : n;
}

interface Instruction {
  keyword: string;
  args: string;
}

/** Dockerfile instructions with comments dropped and `\` continuations joined. */
function dockerInstructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const m = /^(\S+)\s*(.*)$/.exec(full);
    if (m) out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim() });
  }
  return out;
}

const instructions = dockerInstructions(dockerfileText);

describe('docker-compose.yml', () => {
  it('parses as YAML with a services map', () => {
    expect(compose).toBeTypeOf('object');
    expect(compose.services).toBeTypeOf('object');
  });

  it('defines redis, ingress, worker, compactor and mock-llm services', () => {
    expect(Object.keys(compose.services)).toEqual(
      expect.arrayContaining(['redis', 'ingress', 'worker', 'compactor', 'mock-llm']),
    );
  });

  it('runs redis 7 with an everysec AOF, no eviction, a /data volume and a ping healthcheck', () => {
    const redis = service('redis');
    expect(redis.image).toMatch(/^redis:7/);
    const command = Array.isArray(redis.command) ? redis.command.join(' ') : (redis.command ?? '');
    expect(command).toMatch(/--appendonly yes\b/);
    expect(command).toMatch(/--appendfsync everysec\b/);
    expect(command).toMatch(/--maxmemory-policy noeviction\b/);
    expect(healthcheckText(redis)).toMatch(/redis-cli ping/);
    expect(JSON.stringify(redis)).toContain('redis-data:/data');
    expect(compose.volumes).toHaveProperty('redis-data');
  });

  it('starts each app service as its CLI role through the image entrypoint', () => {
    for (const name of APP_SERVICES) {
      const s = service(name);
      expect(s.command, name).toEqual([name]);
      expect(s.entrypoint, `${name} must not override the image entrypoint`).toBeUndefined();
      expect(s.build, `${name} builds the local image`).toBeDefined();
    }
  });

  it('only uses roles the chatlane CLI accepts', () => {
    for (const [name, s] of Object.entries(compose.services)) {
      if (name === 'redis') continue;
      const role = Array.isArray(s.command) ? s.command[0] : s.command;
      expect(CLI_ROLES, `${name} command`).toContain(role);
    }
  });

  it('starts ingress, worker and compactor only once redis is healthy', () => {
    for (const name of REDIS_CLIENTS) {
      const deps = service(name).depends_on;
      expect(Array.isArray(deps), `${name} depends_on must use the long form`).toBe(false);
      expect((deps as Record<string, { condition?: string }>).redis?.condition, name).toBe('service_healthy');
    }
  });

  it('gives every chatlane service the whole .env (env_file, optional), so a variable set there reaches each', () => {
    // As a user would: the example copied to .env, a platform token filled in.
    const dotenv = { ...envFileOf(exampleText), TELEGRAM_BOT_TOKEN: '123:abc', API_TOKEN: 'x'.repeat(40) };
    for (const name of REDIS_CLIENTS) {
      expect(service(name).env_file, name).toEqual([{ path: '.env', required: false }]);
      const e = renderedEnv(name, dotenv);
      expect(e.TELEGRAM_BOT_TOKEN, name).toBe('123:abc');
      expect(e.API_TOKEN, name).toBe('x'.repeat(40));
    }
  });

  it("keeps compose's own values over the file: the compose Redis, and the mock model while .env names none", () => {
    for (const name of REDIS_CLIENTS) {
      const bare = renderedEnv(name, {});
      expect(bare.REDIS_URL, name).toBe('redis://redis:6379');
      expect(bare.LLM_BASE_URL, name).toBe('http://mock-llm:4010/v1');
      expect(bare.LLM_MODEL, name).toBe('mock');
      const real = renderedEnv(name, {
        REDIS_URL: 'redis://elsewhere:6379',
        LLM_MODEL: 'openai:gpt-4o-mini',
      });
      expect(real.REDIS_URL, name).toBe('redis://redis:6379');
      expect(real.LLM_MODEL, name).toBe('openai:gpt-4o-mini');
    }
  });

  it('.env.example names only variables chatlane reads, and every one of them the README and scaling.md point to', () => {
    const known = new Set(Object.keys(configSchema().shape));
    const named = Object.keys(envFileOf(exampleText.replace(/^# ?([A-Z_]+=)/gm, '$1')));
    expect(named.filter((v) => !known.has(v) && !PLATFORM_VARIABLES.test(v))).toEqual([]);
    expect(named).toContain('TELEGRAM_BOT_TOKEN');
  });

  it('publishes the ingress on port 3000', () => {
    const ingress = service('ingress');
    expect((ingress.ports ?? []).map(String)).toContain('3000:3000');
    expect(env(ingress).PORT).toBe('3000');
  });

  it('runs two workers by default and publishes no worker host ports, so --scale works', () => {
    const worker = service('worker');
    expect(worker.deploy?.replicas).toBe(2);
    expect(worker.ports ?? []).toEqual([]);
    expect(worker.container_name).toBeUndefined();
  });

  it('gives worker, compactor and delivery a metrics port and a stop grace period of at least 30s', () => {
    for (const name of ['worker', 'compactor', 'delivery']) {
      const s = service(name);
      expect(env(s).METRICS_PORT, name).toBe('9100');
      expect(healthcheckText(s), name).toContain('127.0.0.1:9100/');
      expect(durationSeconds(s.stop_grace_period ?? '10s'), name).toBeGreaterThanOrEqual(30);
    }
  });

  it('starts mock-llm only under the mock profile, listening on all interfaces', () => {
    const mock = service('mock-llm');
    expect(mock.profiles).toEqual(['mock']);
    expect(env(mock).MOCK_LLM_HOST).toBe('0.0.0.0');
    for (const [name, s] of Object.entries(compose.services)) {
      if (OPTIONAL[name]) expect(s.profiles, name).toEqual([OPTIONAL[name]]);
      else expect(s.profiles, `${name} must run without a profile`).toBeUndefined();
    }
  });

  it('runs delivery in the workers unless .env says DELIVERY_IN_WORKER=false and the delivery profile runs', () => {
    expect(renderedEnv('worker', {}).DELIVERY_IN_WORKER).toBeUndefined();
    expect(renderedEnv('worker', { DELIVERY_IN_WORKER: 'false' }).DELIVERY_IN_WORKER).toBe('false');
    expect(service('delivery').profiles).toEqual(['delivery']);
  });

  it('gives every app service a node-fetch healthcheck and restart: unless-stopped', () => {
    for (const name of APP_SERVICES) {
      const s = service(name);
      const test = s.healthcheck?.test;
      expect(Array.isArray(test) && test[0], `${name} healthcheck exec form`).toBe('CMD');
      expect(healthcheckText(s), name).toMatch(
        /node -e .*fetch\('http:\/\/127\.0\.0\.1:\d+\/(healthz|readyz)'\)/,
      );
      expect(s.restart, name).toBe('unless-stopped');
    }
    expect(healthcheckText(service('ingress'))).toContain('127.0.0.1:3000/readyz');
    expect(healthcheckText(service('mock-llm'))).toContain('127.0.0.1:4010/healthz');
  });
});

describe('Dockerfile', () => {
  it('is multi-stage on node:24-bookworm-slim (Node 24 LTS), within the versions package.json supports', () => {
    const froms = instructions.filter((i) => i.keyword === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const f of froms) expect(f.args).toMatch(/^node:24-bookworm-slim\b/);
    const engines = (JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { engines: { node: string } })
      .engines.node;
    // The image's Node 24 is inside an open-ended `>=` clause of engines.
    const floors = engines.split('||').map((r) => /^\s*>=\s*(\d+)\./.exec(r)?.[1]);
    expect(
      floors.some((major) => major !== undefined && Number(major) <= 24),
      engines,
    ).toBe(true);
  });

  it('installs from the lockfile, builds, then prunes dev dependencies', () => {
    const runs = instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /\bnpm (ci|install)\b/.test(r))).toBe(true);
    expect(runs.some((r) => /\bnpm run build\b/.test(r))).toBe(true);
    expect(runs.some((r) => /\bnpm prune --omit=dev\b/.test(r))).toBe(true);
  });

  it('runs the final stage in production mode with dist, node_modules and package.json', () => {
    const lastFrom = instructions.map((i) => i.keyword).lastIndexOf('FROM');
    const final = instructions.slice(lastFrom);
    expect(final.some((i) => i.keyword === 'ENV' && /NODE_ENV=production/.test(i.args))).toBe(true);
    const copies = final.filter((i) => i.keyword === 'COPY').map((i) => i.args);
    for (const path of ['dist', 'node_modules', 'package.json']) {
      expect(
        copies.some((c) => c.startsWith('--from=') && c.includes(`/${path}`)),
        path,
      ).toBe(true);
    }
  });

  it('ends with a non-root USER in the final stage', () => {
    const lastFrom = instructions.map((i) => i.keyword).lastIndexOf('FROM');
    const users = instructions.slice(lastFrom).filter((i) => i.keyword === 'USER');
    const user = users.at(-1)?.args;
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
  });

  it('runs node as PID 1 via an exec-form ENTRYPOINT with the all role by default', () => {
    const entrypoint = instructions.filter((i) => i.keyword === 'ENTRYPOINT').at(-1);
    expect(JSON.parse(entrypoint?.args ?? 'null')).toEqual(['node', 'dist/cli.js']);
    const cmd = instructions.filter((i) => i.keyword === 'CMD').at(-1);
    expect(JSON.parse(cmd?.args ?? 'null')).toEqual(['all']);
  });

  it('exposes the ingress port 3000', () => {
    const exposed = instructions.filter((i) => i.keyword === 'EXPOSE').flatMap((i) => i.args.split(/\s+/));
    expect(exposed).toContain('3000');
  });
});
