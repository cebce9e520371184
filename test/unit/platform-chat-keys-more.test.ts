import { encodeThreadId as teamsThreadId } from '@chat-adapter/teams';
import { describe, expect, it } from 'vitest';
import { isValidChatKey } from '../../src/shared/chat-key.js';
import { classifySendError } from '../../src/shared/delivery/chat-sdk-sender.js';
import { discord } from '../../src/shared/platforms/discord.js';
import { gchat } from '../../src/shared/platforms/gchat.js';
import type { PlatformModule } from '../../src/shared/platforms/platform.js';
import { slack } from '../../src/shared/platforms/slack.js';
import { slackSendError } from '../../src/shared/platforms/slack-errors.js';
import { teams } from '../../src/shared/platforms/teams.js';
import { whatsapp } from '../../src/shared/platforms/whatsapp.js';
import { whatsappSendError } from '../../src/shared/platforms/whatsapp-errors.js';

/** Thread ids in the exact forms each adapter produces (see each adapter's encodeThreadId). */
const THREADS: [PlatformModule<never>, string, string][] = [
  [slack as PlatformModule<never>, 'slack:C0123ABC:1700000000.000100', 'slack-C0123ABC:1700000000.000100'],
  [slack as PlatformModule<never>, 'slack:D0123ABC:', 'slack-D0123ABC:'],
  [whatsapp as PlatformModule<never>, 'whatsapp:1098765432:15551234567', 'whatsapp-1098765432:15551234567'],
  [
    whatsapp as PlatformModule<never>,
    'whatsapp:1098765432:US.13491208655302741918',
    'whatsapp-1098765432:US.13491208655302741918',
  ],
  [discord as PlatformModule<never>, 'discord:1300:1400:1500', 'discord-1300:1400:1500'],
  [discord as PlatformModule<never>, 'discord:@me:1400', 'discord-@me:1400'],
  [
    gchat as PlatformModule<never>,
    'gchat:spaces/AAA_b-c:dGhyZWFk:dm',
    'gchat-spaces_2fAAA_5fb-c:dGhyZWFk:dm',
  ],
  [
    teams as PlatformModule<never>,
    teamsThreadId({ conversationId: 'a:1x_Yz', serviceUrl: 'https://smba.trafficmanager.net/amer/' }),
    '',
  ],
];

describe('chatKeys of Slack, WhatsApp, Discord, Teams and Google Chat threads', () => {
  for (const [module, threadId, expected] of THREADS) {
    it(`${module.name}: ${threadId} maps to a valid chatKey and back`, () => {
      const key = module.chatKey(threadId);
      expect(isValidChatKey(key)).toBe(true);
      if (expected) expect(key).toBe(expected);
      expect(module.threadIdOf(key)).toBe(threadId);
    });
  }

  it('hashes a thread id too long for a chatKey, deterministically, into a form no id escapes to', () => {
    const long = teamsThreadId({
      conversationId: `19:${'x'.repeat(150)}@thread.tacv2;messageid=1700000000000`,
      serviceUrl: 'https://smba.infra.gov.teams.microsoft.us/teams/',
    });
    const key = teams.chatKey(long);
    expect(isValidChatKey(key)).toBe(true);
    expect(key).toMatch(/^teams-_h[0-9a-f]{40}$/);
    expect(teams.chatKey(long)).toBe(key);
    expect(teams.threadIdOf(key)).toBeUndefined();
  });

  it('refuses chatKeys of another platform or not produced by the mapping', () => {
    expect(slack.threadIdOf('telegram-chat-1')).toBeUndefined();
    expect(slack.threadIdOf('slack-')).toBeUndefined();
    expect(gchat.threadIdOf('gchat-spaces_zz')).toBeUndefined();
  });
});

describe('platform send errors become delivery decisions', () => {
  it('Slack 429 waits the Retry-After seconds', () => {
    const err = Object.assign(new Error('rate limited'), {
      code: 'slack_webapi_rate_limited_error',
      retryAfter: 7,
    });
    expect(classifySendError(slackSendError(err))).toMatchObject({ status: 'retry', afterMs: 7000 });
  });

  it('Slack channel_not_found and not_in_channel give the item up; internal_error retries', () => {
    const platform = (error: string) =>
      Object.assign(new Error(error), { code: 'slack_webapi_platform_error', data: { ok: false, error } });
    expect(classifySendError(slackSendError(platform('channel_not_found')))).toMatchObject({
      status: 'failed',
    });
    expect(classifySendError(slackSendError(platform('not_in_channel')))).toMatchObject({ status: 'failed' });
    expect(classifySendError(slackSendError(platform('is_archived')))).toMatchObject({ status: 'failed' });
    expect(classifySendError(slackSendError(platform('internal_error')))).toMatchObject({ status: 'retry' });
  });

  it('WhatsApp throttling retries, a closed 24-hour window gives up, 5xx retries', () => {
    const graph = (status: number, errorCode: number) =>
      Object.assign(new Error('graph'), {
        name: 'WhatsAppApiError',
        status,
        errorCode,
        providerMessage: 'x',
      });
    expect(classifySendError(whatsappSendError(graph(400, 130429)))).toMatchObject({ status: 'retry' });
    expect(classifySendError(whatsappSendError(graph(429, 4)))).toMatchObject({ status: 'retry' });
    expect(classifySendError(whatsappSendError(graph(400, 131047)))).toMatchObject({ status: 'failed' });
    expect(classifySendError(whatsappSendError(graph(500, 1)))).toMatchObject({ status: 'retry' });
  });
});
