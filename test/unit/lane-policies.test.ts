import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/shared/config.js';
import { laneVariable } from '../../src/shared/config-lanes.js';
import { debounceDelay } from '../../src/shared/lane-debounce.js';
import { configErrorOf } from '../helpers/config-error.js';

const SOURCES = {
  GENERIC_WEBHOOK_SOURCES: 'crm-bot',
  GENERIC_WEBHOOK_SECRETS_CRM_BOT: `whsec_${Buffer.alloc(24, 7).toString('base64')}`,
};

describe('lane policy configuration', () => {
  it('merges and never debounces by default, for every channel', () => {
    const { LANES } = loadConfig({});
    expect(LANES.defaults).toEqual({ policy: 'merge', debounceMs: 0, debounceMaxMs: 0, maxInterrupts: 3 });
    expect(LANES.anyDebounce).toBe(false);
    expect(LANES.anyInterrupt).toBe(false);
    expect(LANES.of({ channel: 'telegram' })).toEqual(LANES.defaults);
  });

  it('waits at most 4x the debounce unless LANE_DEBOUNCE_MAX_MS says; the web channel keeps 0', () => {
    const { LANES } = loadConfig({ LANE_DEBOUNCE_MS: '1500' });
    expect(LANES.of({ channel: 'telegram' })).toMatchObject({ debounceMs: 1500, debounceMaxMs: 6000 });
    expect(LANES.of({ channel: 'api' })).toMatchObject({ debounceMs: 1500, debounceMaxMs: 6000 });
    expect(LANES.of({ channel: 'web' })).toMatchObject({ debounceMs: 0, debounceMaxMs: 0 });
    expect(LANES.of(undefined)).toMatchObject({ debounceMs: 1500 });
    expect(
      loadConfig({ LANE_DEBOUNCE_MS: '1000', LANE_DEBOUNCE_MAX_MS: '2500' }).LANES.defaults,
    ).toMatchObject({
      debounceMaxMs: 2500,
    });
    // Set for the web channel by name, it applies there too.
    expect(
      loadConfig({ LANE_DEBOUNCE_MS: '1500', WEB_LANE_DEBOUNCE_MS: '300' }).LANES.of({ channel: 'web' }),
    ).toMatchObject({ debounceMs: 300, debounceMaxMs: 1200 });
  });

  it('takes each channel’s own settings, a generic source’s before its channel’s', () => {
    const { LANES } = loadConfig({
      ...SOURCES,
      TELEGRAM_LANE_DEBOUNCE_MS: '1000',
      TELEGRAM_LANE_POLICY: 'interrupt',
      GENERIC_LANE_DEBOUNCE_MS: '500',
      GENERIC_CRM_BOT_LANE_MAX_INTERRUPTS: '1',
      GENERIC_CRM_BOT_LANE_POLICY: 'interrupt',
    });
    expect(LANES.of({ channel: 'telegram' })).toEqual({
      policy: 'interrupt',
      debounceMs: 1000,
      debounceMaxMs: 4000,
      maxInterrupts: 3,
    });
    expect(LANES.of({ channel: 'slack' })).toEqual(LANES.defaults);
    expect(LANES.of({ channel: 'generic', extra: { source: 'crm-bot' } })).toEqual({
      policy: 'interrupt',
      debounceMs: 500,
      debounceMaxMs: 2000,
      maxInterrupts: 1,
    });
    expect(LANES.of({ channel: 'generic', extra: { source: 'other' } })).toMatchObject({
      policy: 'merge',
      debounceMs: 500,
    });
    expect(LANES.anyInterrupt).toBe(true);
    expect(LANES.anyDebounce).toBe(true);
  });

  it('names the variable of a bad value', () => {
    expect(configErrorOf(() => loadConfig({ LANE_POLICY: 'queue' })).message).toMatch(/^ {2}LANE_POLICY: /m);
    expect(
      configErrorOf(() => loadConfig({ LANE_DEBOUNCE_MS: '1000', LANE_DEBOUNCE_MAX_MS: '500' })).message,
    ).toMatch(/^ {2}LANE_DEBOUNCE_MAX_MS: must not be below LANE_DEBOUNCE_MS/m);
    expect(configErrorOf(() => loadConfig({ SLACK_LANE_POLICY: 'rollback' })).message).toMatch(
      /^ {2}SLACK_LANE_POLICY: must be merge or interrupt/m,
    );
    expect(configErrorOf(() => loadConfig({ WHATSAPP_LANE_DEBOUNCE_MS: '1.5s' })).message).toMatch(
      /^ {2}WHATSAPP_LANE_DEBOUNCE_MS: must be a whole number/m,
    );
    expect(
      configErrorOf(() =>
        loadConfig({ TELEGRAM_LANE_DEBOUNCE_MS: '900', TELEGRAM_LANE_DEBOUNCE_MAX_MS: '100' }),
      ).message,
    ).toMatch(/^ {2}TELEGRAM_LANE_DEBOUNCE_MAX_MS: /m);
  });

  it('spells a channel’s variables in capitals, other characters as _', () => {
    expect(laneVariable('generic:crm-bot', 'DEBOUNCE_MS')).toBe('GENERIC_CRM_BOT_LANE_DEBOUNCE_MS');
    expect(laneVariable('gchat', 'POLICY')).toBe('GCHAT_LANE_POLICY');
  });
});

describe('debounceDelay', () => {
  const settings = { debounceMs: 1000, debounceMaxMs: 4000 };
  const idle = (waited: number) => ({ leased: false, oldestMs: 10_000, nowMs: 10_000 + waited });

  it('waits the debounce for a burst that just began', () => {
    expect(debounceDelay(settings, idle(0))).toBe(1000);
    expect(debounceDelay(settings, idle(2500))).toBe(1000);
  });

  it('never past the max wait after the first message, and not at all once there', () => {
    expect(debounceDelay(settings, idle(3400))).toBe(600);
    expect(debounceDelay(settings, idle(4000))).toBe(0);
    expect(debounceDelay(settings, idle(60_000))).toBe(0);
  });

  it('does not wait while a turn holds the lane, nor with debounce off', () => {
    expect(debounceDelay(settings, { ...idle(0), leased: true })).toBe(0);
    expect(debounceDelay({ debounceMs: 0, debounceMaxMs: 0 }, idle(0))).toBe(0);
    expect(debounceDelay(settings, undefined)).toBe(0);
  });
});
