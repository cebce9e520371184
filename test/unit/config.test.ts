import { describe, expect, it } from 'vitest';
import {
  type ConfigError,
  filePolicy,
  loadConfig,
  parseModelId,
  requireCompactionModel,
  requireModel,
} from '../../src/shared/config.js';
import { configErrorOf } from '../helpers/config-error.js';

/** The variable names a ConfigError lists, one per `  NAME: reason` line. */
function namedVariables(err: ConfigError): string[] {
  return [...err.message.matchAll(/^ {2}([A-Z_]+):/gm)].map((m) => m[1]!);
}

describe('loadConfig defaults', () => {
  it('gives the documented defaults for an empty environment', () => {
    expect(loadConfig({})).toMatchObject({
      REDIS_URL: 'redis://127.0.0.1:6379',
      CHATLANE_PREFIX: 'chatlane',
      PORT: 3000,
      WORKER_CONCURRENCY: 32,
      MAX_STEPS: 16,
      MAX_MERGES_PER_TURN: 8,
      MAX_PENDING_PER_CHAT: 1000,
      MAX_INPUT_TOKENS: 12_000,
      HISTORY_KEEP_LAST_MESSAGES: 30,
      MAX_CHARS_PER_MESSAGE: 4000,
    });
  });

  it('runs delivery in the worker with bounded attempts and a send timeout by default', () => {
    expect(loadConfig({})).toMatchObject({
      DELIVERY_IN_WORKER: true,
      DELIVERY_CONCURRENCY: 64,
      DELIVERY_MAX_ATTEMPTS: 10,
      DELIVERY_BACKOFF_MS: 1000,
      DELIVERY_BACKOFF_MAX_MS: 60_000,
      DELIVERY_TIMEOUT_MS: 10_000,
    });
    expect(loadConfig({ DELIVERY_IN_WORKER: 'false' }).DELIVERY_IN_WORKER).toBe(false);
    const err = configErrorOf(() => loadConfig({ DELIVERY_MAX_ATTEMPTS: '0', DELIVERY_IN_WORKER: 'no' }));
    expect(namedVariables(err).sort()).toEqual(['DELIVERY_IN_WORKER', 'DELIVERY_MAX_ATTEMPTS']);
  });

  it('reads generic webhook sources with their secrets, newest first, from per-source variables', () => {
    const a = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
    const b = `whsec_${Buffer.alloc(24, 2).toString('base64')}`;
    const config = loadConfig({
      GENERIC_WEBHOOK_SOURCES: 'crm, support-desk',
      GENERIC_WEBHOOK_SECRETS_CRM: `${a} ${b}`,
      GENERIC_WEBHOOK_SECRETS_SUPPORT_DESK: b,
      GENERIC_WEBHOOK_REPLY_HOSTS: 'hooks.example.com,*.crm.example.com,127.0.0.1',
    });
    expect(config.GENERIC_WEBHOOKS).toEqual([
      { name: 'crm', secrets: [a, b] },
      { name: 'support-desk', secrets: [b] },
    ]);
    expect(config.GENERIC_WEBHOOK_REPLY_HOSTS).toEqual([
      'hooks.example.com',
      '*.crm.example.com',
      '127.0.0.1',
    ]);
    expect(config.GENERIC_WEBHOOK_REPLY_ALLOW_HTTP).toBe(false);
    expect(loadConfig({}).GENERIC_WEBHOOKS).toEqual([]);
  });

  it('names the secrets variable a listed source lacks, and refuses secrets that are not whsec_ base64 of 24-64 bytes', () => {
    const short = `whsec_${Buffer.alloc(8).toString('base64')}`;
    const err = configErrorOf(() =>
      loadConfig({
        GENERIC_WEBHOOK_SOURCES: 'crm,forms,Bad Name',
        GENERIC_WEBHOOK_SECRETS_FORMS: `${short},not-base64!`,
      }),
    );
    expect(namedVariables(err)).toEqual(['GENERIC_WEBHOOK_SOURCES']);
    const err2 = configErrorOf(() =>
      loadConfig({
        GENERIC_WEBHOOK_SOURCES: 'crm,forms',
        GENERIC_WEBHOOK_SECRETS_FORMS: `${short},not-base64!`,
      }),
    );
    expect(namedVariables(err2)).toEqual([
      'GENERIC_WEBHOOK_SECRETS_CRM',
      'GENERIC_WEBHOOK_SECRETS_FORMS',
      'GENERIC_WEBHOOK_SECRETS_FORMS',
    ]);
    expect(err2.message).toContain("source 'crm' needs at least one signing secret");
  });

  it('leaves the optional model and auth settings unset by default', () => {
    const config = loadConfig({});
    expect(config.LLM_BASE_URL).toBeUndefined();
    expect(config.LLM_MODEL).toBeUndefined();
    expect(config.LLM_API_KEY).toBeUndefined();
    expect(config.API_TOKEN).toBeUndefined();
    expect(config.SYSTEM_PROMPT_FILE).toBeUndefined();
    expect(config.ARCHIVE_ON_COMPACT).toBe(true);
    expect(config.COMPACT_AT_TOKENS).toBe(9600);
    expect(config.KEEP_RECENT_TOKENS).toBe(4800);
  });

  it('derives compaction thresholds from MAX_INPUT_TOKENS unless given', () => {
    expect(loadConfig({ MAX_INPUT_TOKENS: '2000' })).toMatchObject({
      COMPACT_AT_TOKENS: 1600,
      KEEP_RECENT_TOKENS: 800,
    });
    expect(loadConfig({ MAX_INPUT_TOKENS: '2000', COMPACT_AT_TOKENS: '1000' }).COMPACT_AT_TOKENS).toBe(1000);
  });

  it('ignores variables it does not know', () => {
    const config = loadConfig({ HOME: '/root', PATH: '/usr/bin' });
    expect(config).not.toHaveProperty('HOME');
    expect(config).not.toHaveProperty('PATH');
  });
});

describe('loadConfig parsing', () => {
  it('coerces numbers from their string form', () => {
    const config = loadConfig({
      PORT: '8080',
      WORKER_CONCURRENCY: '4',
      MAX_STEPS: '3',
      MAX_MERGES_PER_TURN: '0',
      MAX_INPUT_TOKENS: '50000',
      MAX_CHARS_PER_MESSAGE: '100',
    });
    expect(config.PORT).toBe(8080);
    expect(config.WORKER_CONCURRENCY).toBe(4);
    expect(config.MAX_STEPS).toBe(3);
    expect(config.MAX_MERGES_PER_TURN).toBe(0);
    expect(config.MAX_INPUT_TOKENS).toBe(50_000);
    expect(config.MAX_CHARS_PER_MESSAGE).toBe(100);
  });

  it('keeps given strings and parses booleans', () => {
    const config = loadConfig({
      REDIS_URL: 'redis://cache:6380/2',
      CHATLANE_PREFIX: 'prod.v2_a-b',
      ARCHIVE_ON_COMPACT: 'false',
    });
    expect(config.REDIS_URL).toBe('redis://cache:6380/2');
    expect(config.CHATLANE_PREFIX).toBe('prod.v2_a-b');
    expect(config.ARCHIVE_ON_COMPACT).toBe(false);
    expect(loadConfig({ ARCHIVE_ON_COMPACT: '1' }).ARCHIVE_ON_COMPACT).toBe(true);
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '65536'],
    ['PORT', '3.5'],
    ['WORKER_CONCURRENCY', '0'],
    ['MAX_STEPS', '-1'],
    ['CHATLANE_PREFIX', 'a{b}'],
    ['CHATLANE_PREFIX', 'a:b'],
    ['REDIS_URL', 'not a url'],
    ['LLM_BASE_URL', 'not a url'],
    ['ARCHIVE_ON_COMPACT', 'maybe'],
    // More sends than a chat's uncommitted record keeps: commit.lua would refuse every commit.
    ['CHAT_SEND_MAX_PER_TURN', '101'],
  ])('throws a ConfigError naming %s for the bad value %j', (name, value) => {
    const err = configErrorOf(() => loadConfig({ [name]: value }));
    expect(err.name).toBe('ConfigError');
    expect(namedVariables(err)).toEqual([name]);
  });

  it('names every bad variable when several are wrong', () => {
    const err = configErrorOf(() => loadConfig({ PORT: 'abc', REDIS_URL: 'nope', MAX_STEPS: '1' }));
    expect(namedVariables(err).sort()).toEqual(['PORT', 'REDIS_URL']);
  });

  it('treats empty or blank optional strings as unset', () => {
    const config = loadConfig({
      LLM_BASE_URL: '',
      LLM_MODEL: '   ',
      LLM_API_KEY: '',
      API_TOKEN: '',
      SYSTEM_PROMPT_FILE: ' ',
    });
    expect(config.LLM_BASE_URL).toBeUndefined();
    expect(config.LLM_MODEL).toBeUndefined();
    expect(config.LLM_API_KEY).toBeUndefined();
    expect(config.API_TOKEN).toBeUndefined();
    expect(config.SYSTEM_PROMPT_FILE).toBeUndefined();
  });

  // Compose files pass `${VAR:-}`, i.e. an empty string, for variables the operator did not
  // set. An empty numeric variable must mean "unset" (its default) or be refused; today
  // z.coerce.number turns '' into 0, so PORT becomes a random port and merges are disabled.
  it('treats an empty numeric variable as unset and uses its default', () => {
    const config = loadConfig({ PORT: '', MAX_MERGES_PER_TURN: '' });
    expect(config.PORT).toBe(3000);
    expect(config.MAX_MERGES_PER_TURN).toBe(8);
  });
});

describe('requireModel', () => {
  it('throws a ConfigError naming both LLM_BASE_URL and LLM_MODEL when neither is set', () => {
    const err = configErrorOf(() => requireModel(loadConfig({})));
    expect(err.message).toContain('set LLM_BASE_URL and LLM_MODEL ');
  });

  it('names only the missing variable when one of the two is set', () => {
    const noModel = configErrorOf(() =>
      requireModel(loadConfig({ LLM_BASE_URL: 'http://127.0.0.1:4010/v1' })),
    );
    expect(noModel.message).toContain('set LLM_MODEL (');
    const noUrl = configErrorOf(() => requireModel(loadConfig({ LLM_MODEL: 'gpt-4o-mini' })));
    expect(noUrl.message).toContain('set LLM_BASE_URL (');
  });

  it('counts empty strings as missing', () => {
    const err = configErrorOf(() => requireModel(loadConfig({ LLM_BASE_URL: '', LLM_MODEL: '' })));
    expect(err.message).toContain('set LLM_BASE_URL and LLM_MODEL ');
  });

  it('returns the model config when both are set: no prefix is the openai-compatible provider', () => {
    const config = loadConfig({
      LLM_BASE_URL: 'http://127.0.0.1:4010/v1',
      LLM_MODEL: 'mock',
      LLM_API_KEY: 'sk-1',
    });
    expect(requireModel(config)).toEqual({
      models: [{ id: 'openai-compatible:mock', provider: 'openai-compatible', model: 'mock' }],
      providers: { 'openai-compatible': { baseURL: 'http://127.0.0.1:4010/v1', apiKey: 'sk-1' } },
    });
  });

  it('returns an undefined api key when none is set', () => {
    const config = loadConfig({ LLM_BASE_URL: 'http://127.0.0.1:4010/v1', LLM_MODEL: 'mock' });
    expect(requireModel(config).providers['openai-compatible']).toEqual({
      baseURL: 'http://127.0.0.1:4010/v1',
      apiKey: undefined,
    });
  });

  it('keeps an unknown prefix as part of an openai-compatible model id (ollama llama3:8b)', () => {
    const config = loadConfig({ LLM_BASE_URL: 'http://127.0.0.1:11434/v1', LLM_MODEL: 'llama3:8b' });
    expect(requireModel(config).models).toEqual([
      { id: 'openai-compatible:llama3:8b', provider: 'openai-compatible', model: 'llama3:8b' },
    ]);
    expect(parseModelId('openai-compatible:llama3:8b').model).toBe('llama3:8b');
  });

  it('reads each provider its own key and base URL, with the provider default when no URL is set', () => {
    const config = loadConfig({
      LLM_MODEL: 'anthropic:claude-sonnet-4-5',
      LLM_FALLBACK_MODELS: 'openai:gpt-5-mini, google:gemini-2.5-flash,mock',
      ANTHROPIC_API_KEY: 'a-key',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:4010/v1',
      OPENAI_API_KEY: 'o-key',
      GOOGLE_GENERATIVE_AI_API_KEY: 'g-key',
      LLM_BASE_URL: 'http://127.0.0.1:4010/v1',
    });
    const models = requireModel(config);
    expect(models.models.map((m) => m.id)).toEqual([
      'anthropic:claude-sonnet-4-5',
      'openai:gpt-5-mini',
      'google:gemini-2.5-flash',
      'openai-compatible:mock',
    ]);
    expect(models.providers).toEqual({
      anthropic: { baseURL: 'http://127.0.0.1:4010/v1', apiKey: 'a-key' },
      openai: { baseURL: 'https://api.openai.com/v1', apiKey: 'o-key' },
      google: { baseURL: 'https://generativelanguage.googleapis.com/v1beta', apiKey: 'g-key' },
      'openai-compatible': { baseURL: 'http://127.0.0.1:4010/v1', apiKey: undefined },
    });
  });

  it('gives the compactor COMPACTION_MODEL, then the fallback models, needing only their providers', () => {
    const config = loadConfig({
      COMPACTION_MODEL: 'google:gemini-2.5-flash-lite',
      LLM_FALLBACK_MODELS: 'openai:gpt-5-nano',
      GOOGLE_GENERATIVE_AI_API_KEY: 'g-key',
      OPENAI_API_KEY: 'o-key',
    });
    expect(requireCompactionModel(config).models.map((m) => m.id)).toEqual([
      'google:gemini-2.5-flash-lite',
      'openai:gpt-5-nano',
    ]);
    expect(Object.keys(requireCompactionModel(config).providers)).toEqual(['google', 'openai']);
  });

  // Every half configuration names the variable to set (test/e2e/cli.test.ts: the same for the processes).
  it.each([
    ['openai without its key', { LLM_MODEL: 'openai:gpt-5-mini' }, 'OPENAI_API_KEY: missing'],
    ['anthropic without its key', { LLM_MODEL: 'anthropic:claude-haiku-4-5' }, 'ANTHROPIC_API_KEY: missing'],
    [
      'google without its key',
      { LLM_MODEL: 'google:gemini-2.5-flash' },
      'GOOGLE_GENERATIVE_AI_API_KEY: missing',
    ],
    [
      'openai-compatible: without LLM_BASE_URL',
      { LLM_MODEL: 'openai-compatible:mock' },
      'set LLM_BASE_URL (',
    ],
    [
      'a fallback model without its key',
      {
        LLM_BASE_URL: 'http://127.0.0.1:4010/v1',
        LLM_MODEL: 'mock',
        LLM_FALLBACK_MODELS: 'anthropic:claude-haiku-4-5',
      },
      'ANTHROPIC_API_KEY: missing: LLM_FALLBACK_MODELS',
    ],
    [
      'an unprefixed fallback model without LLM_BASE_URL',
      { LLM_MODEL: 'openai:gpt-5-mini', OPENAI_API_KEY: 'k', LLM_FALLBACK_MODELS: 'mock' },
      'LLM_BASE_URL: missing: LLM_FALLBACK_MODELS',
    ],
    [
      'a provider with no model',
      { LLM_MODEL: 'anthropic:', ANTHROPIC_API_KEY: 'k' },
      "LLM_MODEL: 'anthropic:': no model",
    ],
  ])('stops on %s, naming the variable', (_case, env, message) => {
    expect(configErrorOf(() => requireModel(loadConfig(env))).message).toContain(message);
  });

  it('stops on a COMPACTION_MODEL whose provider has no key', () => {
    const config = loadConfig({
      LLM_BASE_URL: 'http://127.0.0.1:4010/v1',
      LLM_MODEL: 'mock',
      COMPACTION_MODEL: 'openai:gpt-5-nano',
    });
    expect(configErrorOf(() => requireCompactionModel(config)).message).toContain(
      "OPENAI_API_KEY: missing: COMPACTION_MODEL 'openai:gpt-5-nano'",
    );
  });

  it.each([
    ['a base URL that is not a URL', { ANTHROPIC_BASE_URL: 'not a url' }, 'ANTHROPIC_BASE_URL:'],
    [
      'a fallback list naming a model twice',
      { LLM_FALLBACK_MODELS: 'mock,openai-compatible:mock' },
      'LLM_FALLBACK_MODELS: lists a model twice',
    ],
    [
      'a fallback entry with no model',
      { LLM_FALLBACK_MODELS: 'google:' },
      "LLM_FALLBACK_MODELS: 'google:': no model",
    ],
  ])('rejects %s when the configuration is loaded', (_case, env, message) => {
    expect(configErrorOf(() => loadConfig(env)).message).toContain(message);
  });
});

describe('file part and failure settings', () => {
  it('allows images, PDF and plain text by default and reads FILE_MEDIA_TYPES as a lowercase list', () => {
    const defaults = loadConfig({});
    expect(filePolicy(defaults)).toEqual({
      mediaTypes: ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', 'text/plain'],
      maxDataBytes: 131_072,
    });
    expect(defaults.FAILURE_NOTICE).toMatch(/couldn't process your last message/);
    expect(loadConfig({ FILE_MEDIA_TYPES: 'Image/*, application/pdf' }).FILE_MEDIA_TYPES).toEqual([
      'image/*',
      'application/pdf',
    ]);
  });

  it('names FILE_MEDIA_TYPES when an entry is not a media type', () => {
    const err = configErrorOf(() => loadConfig({ FILE_MEDIA_TYPES: 'image/png,pdf' }));
    expect(namedVariables(err)).toEqual(['FILE_MEDIA_TYPES']);
    expect(err.message).toMatch(/'pdf' is not a media type/);
  });
});
