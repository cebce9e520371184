import { describe, expect, it } from 'vitest';
import { ABANDONED_OVERLAP_MS, MockLlmState, type RecordedRequest } from '../../src/mock-llm/state.js';

const request = (chatKey: string, at = Date.now()): RecordedRequest => ({
  chatKey,
  protocol: 'chat-completions',
  model: 'mock',
  at,
  stream: true,
  messages: [],
  tools: [],
  promptTokens: 0,
  cachedTokens: 0,
  body: {},
});

describe('the mock model’s per-chat overlap check', () => {
  it('does not count a request its client had abandoned as overlapping the next one that arrived just before its close', () => {
    const state = new MockLlmState();
    const first = state.begin(request('c'));
    const next = state.begin(request('c'));
    expect(state.violations).toHaveLength(1);
    // The close of the aborted first call is handled after the next call's arrival.
    first.end(true);
    expect(state.violations).toEqual([]);
    expect(state.maxInFlightPerChat).toBe(1);
    next.end();
  });

  it('counts an overlap whose older request ran on, or was abandoned only later', () => {
    const state = new MockLlmState();
    const ranOn = state.begin(request('c'));
    state.begin(request('c')).end();
    ranOn.end();
    expect(state.violations).toHaveLength(1);

    const late = state.begin(request('d', Date.now() - 10 * ABANDONED_OVERLAP_MS));
    state.begin(request('d', Date.now() - 5 * ABANDONED_OVERLAP_MS)).end();
    late.end(true);
    expect(state.violations.map((v) => v.chatKey)).toEqual(['c', 'd']);
    expect(state.maxInFlightPerChat).toBe(2);
  });

  it('of three at once, an abandoned one leaves the other two counted', () => {
    const state = new MockLlmState();
    const a = state.begin(request('e'));
    const b = state.begin(request('e'));
    const c = state.begin(request('e'));
    a.end(true);
    expect(state.violations.map((v) => v.inFlight)).toEqual([2]);
    b.end();
    c.end();
  });
});
