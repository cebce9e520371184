import { getEventListeners } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StepDeadline } from '../../src/worker/agent/step-deadline.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('StepDeadline', () => {
  it('aborts a step that runs past its time with the SDK’s TimeoutError, leaving the turn’s signal alone', () => {
    const turn = new AbortController();
    const deadline = new StepDeadline(turn.signal, 1000);
    deadline.arm();
    vi.advanceTimersByTime(999);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(true);
    const reason = deadline.signal.reason as DOMException;
    expect(reason).toBeInstanceOf(DOMException);
    expect(reason.name).toBe('TimeoutError');
    expect(reason.message).toBe('Step timeout of 1000ms exceeded');
    expect(turn.signal.aborted).toBe(false);
  });

  it('times each step on its own: a finished step’s timer never fires, the next step gets the full time', () => {
    const deadline = new StepDeadline(new AbortController().signal, 1000);
    deadline.arm();
    vi.advanceTimersByTime(900);
    deadline.disarm();
    vi.advanceTimersByTime(5000);
    deadline.arm();
    vi.advanceTimersByTime(900);
    deadline.arm(); // a step started without the last one finishing: the clock restarts once
    vi.advanceTimersByTime(900);
    expect(deadline.signal.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(1);
  });

  it('aborts with the turn’s reason when the turn is lost or stopped, before or after it was created', () => {
    const turn = new AbortController();
    const deadline = new StepDeadline(turn.signal, 1000);
    const reason = new Error('lane lost: renew rejected');
    turn.abort(reason);
    expect(deadline.signal.reason).toBe(reason);

    expect(new StepDeadline(turn.signal, 1000).signal.reason).toBe(reason);
  });

  it('leaves nothing behind once disposed: no timer, no listener on the turn’s signal', () => {
    const turn = new AbortController();
    const deadline = new StepDeadline(turn.signal, 1000);
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(1);
    deadline.arm();
    deadline.dispose();
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(turn.signal, 'abort')).toHaveLength(0);
    turn.abort(new Error('later'));
    expect(deadline.signal.aborted).toBe(false);
  });
});
