import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';

/**
 * Slack, WhatsApp, Discord, Teams and Google Chat are turned on by their adapters' own
 * variables; a platform whose settings are half there stops the process at boot with a
 * message naming the missing variable (the ConfigError `chatlane` prints before exiting).
 */
function problemsOf(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('loadConfig accepted a half configuration');
}

const enabledNames = (env: Record<string, string>) =>
  loadConfig(env)
    .PLATFORMS.map((p) => p.module.name)
    .sort();

const SLACK = { SLACK_BOT_TOKEN: 'xoxb-1-2-abc', SLACK_SIGNING_SECRET: 'a'.repeat(32) };
const WHATSAPP = {
  WHATSAPP_ACCESS_TOKEN: 'EAAG-token',
  WHATSAPP_APP_SECRET: 'app-secret',
  WHATSAPP_PHONE_NUMBER_ID: '1098765432',
  WHATSAPP_VERIFY_TOKEN: 'verify-me',
};
const DISCORD = {
  DISCORD_BOT_TOKEN: 'bot-token',
  DISCORD_PUBLIC_KEY: 'ab'.repeat(32),
  DISCORD_APPLICATION_ID: '1100000000000000001',
};
const TEAMS = { TEAMS_APP_ID: '00000000-0000-4000-8000-000000000001', TEAMS_APP_PASSWORD: 'client-secret' };
const GCHAT = {
  GOOGLE_CHAT_CREDENTIALS: JSON.stringify({
    client_email: 'bot@p.iam.gserviceaccount.com',
    private_key: 'k',
  }),
  GOOGLE_CHAT_PROJECT_NUMBER: '123456789012',
};

describe('platforms enabled by their adapters’ variables', () => {
  it('enables nothing when no platform variable is set', () => {
    expect(enabledNames({})).toEqual([]);
  });

  it('enables each platform whose credentials are all present', () => {
    expect(enabledNames({ ...SLACK, ...WHATSAPP, ...DISCORD, ...TEAMS, ...GCHAT })).toEqual([
      'discord',
      'gchat',
      'slack',
      'teams',
      'whatsapp',
    ]);
  });

  it('accepts application default credentials instead of a Google Chat key', () => {
    expect(
      enabledNames({
        GOOGLE_CHAT_USE_ADC: 'true',
        GOOGLE_CHAT_ENDPOINT_URL: 'https://bot.example.com/webhooks/gchat',
      }),
    ).toEqual(['gchat']);
  });
});

describe('a half-configured platform stops the process naming the missing variable', () => {
  const cases: [string, Record<string, string>, string][] = [
    [
      'Slack token without signing secret',
      { SLACK_BOT_TOKEN: SLACK.SLACK_BOT_TOKEN },
      'SLACK_SIGNING_SECRET: missing',
    ],
    [
      'Slack signing secret without token',
      { SLACK_SIGNING_SECRET: SLACK.SLACK_SIGNING_SECRET },
      'SLACK_BOT_TOKEN: missing',
    ],
    ['Slack API URL alone', { SLACK_API_URL: 'http://127.0.0.1:9/api/' }, 'SLACK_BOT_TOKEN: missing'],
    [
      'WhatsApp without verify token',
      { ...WHATSAPP, WHATSAPP_VERIFY_TOKEN: '' },
      'WHATSAPP_VERIFY_TOKEN: missing',
    ],
    ['WhatsApp without app secret', { ...WHATSAPP, WHATSAPP_APP_SECRET: '' }, 'WHATSAPP_APP_SECRET: missing'],
    [
      'WhatsApp without phone number id',
      { ...WHATSAPP, WHATSAPP_PHONE_NUMBER_ID: '' },
      'WHATSAPP_PHONE_NUMBER_ID: missing',
    ],
    ['Discord without public key', { ...DISCORD, DISCORD_PUBLIC_KEY: '' }, 'DISCORD_PUBLIC_KEY: missing'],
    [
      'Discord without application id',
      { ...DISCORD, DISCORD_APPLICATION_ID: '' },
      'DISCORD_APPLICATION_ID: missing',
    ],
    ['Teams without password', { TEAMS_APP_ID: TEAMS.TEAMS_APP_ID }, 'TEAMS_APP_PASSWORD: missing'],
    ['Teams without app id', { TEAMS_APP_PASSWORD: 'x' }, 'TEAMS_APP_ID: missing'],
    [
      'Google Chat without a verifier',
      { GOOGLE_CHAT_CREDENTIALS: GCHAT.GOOGLE_CHAT_CREDENTIALS },
      'GOOGLE_CHAT_PROJECT_NUMBER: missing',
    ],
    [
      'Google Chat without credentials',
      { GOOGLE_CHAT_PROJECT_NUMBER: '123456789012' },
      'GOOGLE_CHAT_CREDENTIALS: missing',
    ],
  ];
  for (const [what, env, expected] of cases) {
    it(what, () => {
      expect(problemsOf(env)).toContain(expected);
    });
  }

  it('names malformed values too (not a URL, not a key, not a bot token)', () => {
    const message = problemsOf({
      ...SLACK,
      SLACK_API_URL: 'slack.local',
      ...DISCORD,
      DISCORD_PUBLIC_KEY: 'not-hex',
      GOOGLE_CHAT_CREDENTIALS: '{oops',
      GOOGLE_CHAT_PROJECT_NUMBER: '123456789012',
    });
    expect(message).toContain('SLACK_API_URL: is not an http(s) URL');
    expect(message).toContain('DISCORD_PUBLIC_KEY: must be the 64 hex characters');
    expect(message).toContain('GOOGLE_CHAT_CREDENTIALS: must be the service account key JSON');
  });

  it('lists every half-configured platform at once, never a secret', () => {
    const message = problemsOf({ SLACK_BOT_TOKEN: 'xoxb-secret-value', TEAMS_APP_PASSWORD: 'hunter2' });
    expect(message).toContain('SLACK_SIGNING_SECRET: missing');
    expect(message).toContain('TEAMS_APP_ID: missing');
    expect(message).not.toContain('xoxb-secret-value');
    expect(message).not.toContain('hunter2');
  });
});
