import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { TurnAbort } from '../../src/worker/agent/turn-abort.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** TurnAbort as a Lane uses it: `end` is how a lost or stopped lane aborts the turn. */
class EndableTurn extends TurnAbort {
  endWith(reason: Error): boolean {
    return this.end(reason);
  }
}

describe('TurnAbort', () => {
  it('aborts a step that runs past its time with the SDK’s TimeoutError, and records it as a timeout, not as the turn’s end', () => {
    const turn = new TurnAbort();
    turn.armStep(1000);
    vi.advanceTimersByTime(999);
    expect(turn.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(turn.signal.aborted).toBe(true);
    const reason = turn.signal.reason as DOMException;
    expect(reason).toBeInstanceOf(DOMException);
    expect(reason.name).toBe('TimeoutError');
    expect(reason.message).toBe('Step timeout of 1000ms exceeded');
    expect(turn.timedOut).toBe(true);
    expect(turn.ended).toBeUndefined();
  });

  it('times each step on its own: a finished step’s timer never fires, the next step gets the full time', () => {
    const turn = new TurnAbort();
    turn.armStep(1000);
    vi.advanceTimersByTime(900);
    turn.disarmStep();
    vi.advanceTimersByTime(5000);
    turn.armStep(1000);
    vi.advanceTimersByTime(900);
    turn.armStep(1000); // a step started without the last one finishing: the clock restarts once
    vi.advanceTimersByTime(900);
    expect(turn.signal.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(1);
  });

  it('aborts with the end’s reason when the turn is ended (lost or stopped); the first end wins and no step timer is left', () => {
    const turn = new EndableTurn();
    turn.armStep(1000);
    const reason = new Error('lane lost: renew rejected');
    expect(turn.endWith(reason)).toBe(true);
    expect(turn.signal.reason).toBe(reason);
    expect(turn.ended).toBe(reason);
    expect(turn.timedOut).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
    expect(turn.endWith(new Error('later'))).toBe(false);
    expect(turn.ended).toBe(reason);
  });

  it('an end after a timeout is still recorded as the turn’s end, though the signal keeps the timeout’s reason', () => {
    const turn = new EndableTurn();
    turn.armStep(1000);
    vi.advanceTimersByTime(1000);
    const reason = new Error('lane lost: renew rejected');
    expect(turn.endWith(reason)).toBe(true);
    expect(turn.ended).toBe(reason);
    expect((turn.signal.reason as DOMException).name).toBe('TimeoutError');
  });

  it('a new loop after a timed-out one starts with a signal that is not aborted; after an end it stays aborted', () => {
    const turn = new EndableTurn();
    turn.beginLoop();
    const first = turn.signal;
    turn.armStep(1000);
    vi.advanceTimersByTime(1000);
    turn.beginLoop();
    expect(first.aborted).toBe(true);
    expect(turn.signal.aborted).toBe(false);
    expect(turn.timedOut).toBe(false);

    turn.endWith(new Error('stopped'));
    turn.beginLoop();
    expect(turn.signal.aborted).toBe(true);
  });

  it('leaves nothing behind once disarmed: no timer, no listener of its own', () => {
    const turn = new TurnAbort();
    turn.armStep(1000);
    turn.disarmStep();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(5000);
    expect(turn.signal.aborted).toBe(false);
  });
});
