import { describe, expect, it } from 'vitest';
import { streamIdAfter } from '../../src/loadtest/chat-state.js';
import { SseParser } from '../../src/loadtest/sse.js';

describe('the load tool’s SSE parser', () => {
  it('reads event, data and id, skips heartbeat comments, dispatches on a blank line', () => {
    const p = new SseParser();
    expect(
      p.push(
        'retry: 2000\nid: 1-0.0-0\nevent: ready\ndata: {"a":1}\n\n: heartbeat\n\nevent: outbox\ndata: x\n\n',
      ),
    ).toEqual([
      { event: 'ready', data: '{"a":1}', id: '1-0.0-0' },
      { event: 'outbox', data: 'x', id: undefined },
    ]);
  });

  it('joins a message split anywhere across chunks, CRLF and CR included', () => {
    const text =
      'id: 5-1.3-0\r\nevent: event\r\ndata: line one\r\ndata: line two\r\n\r\nevent: outbox\rdata: y\r\r';
    for (let cut = 1; cut < text.length; cut++) {
      const p = new SseParser();
      const got = [...p.push(text.slice(0, cut)), ...p.push(text.slice(cut))];
      expect(got, `cut at ${cut}`).toEqual([
        { event: 'event', data: 'line one\nline two', id: '5-1.3-0' },
        { event: 'outbox', data: 'y', id: undefined },
      ]);
    }
  });

  it('waits for the blank line: an unfinished message is not dispatched', () => {
    const p = new SseParser();
    expect(p.push('event: outbox\ndata: {"id"')).toEqual([]);
    expect(p.push(':"1-0"}\n')).toEqual([]);
    expect(p.push('\n')).toEqual([{ event: 'outbox', data: '{"id":"1-0"}', id: undefined }]);
  });
});

describe('stream ids in order', () => {
  it('compares milliseconds, then the sequence, as numbers', () => {
    expect(streamIdAfter('10-0', '9-5')).toBe(true);
    expect(streamIdAfter('9-10', '9-9')).toBe(true);
    expect(streamIdAfter('9-9', '9-9')).toBe(false);
    expect(streamIdAfter('1700000000000-0', '1700000000001-0')).toBe(false);
  });
});
