import type { UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { interleave, type MergePoint, type Segment } from '../../src/worker/agent/interleave.js';

type Part = UIMessage['parts'][number];

const stepStart = (): Part => ({ type: 'step-start' });
const text = (value: string): Part => ({ type: 'text', text: value });
const send = (id: string, value: string): Part => ({
  type: 'tool-chat_send',
  toolCallId: id,
  state: 'output-available',
  input: { text: value },
  output: { status: 'sent', id: `${id}-0` },
});

/** A compact picture of the layout: 'A:<part labels>' or 'U:<items>'. */
function layout(segments: Segment<string>[]): string[] {
  return segments.map((s) =>
    s.kind === 'assistant' ? `A:${s.parts.map(label).join(',')}` : `U:${s.items.join(',')}`,
  );
}

function label(part: Part): string {
  if (part.type === 'step-start') return '|';
  if (part.type === 'text') return `t(${part.text})`;
  if (part.type.startsWith('tool-') && 'toolCallId' in part) return `${part.type}(${part.toolCallId})`;
  return part.type;
}

function isMeaningful(part: Part): boolean {
  if (part.type === 'step-start') return false;
  if (part.type === 'text' || part.type === 'reasoning') return part.text.trim().length > 0;
  return true;
}

function assistantParts(segments: Segment<string>[]): Part[] {
  return segments.flatMap((s) => (s.kind === 'assistant' ? s.parts : []));
}

function userItems(segments: Segment<string>[]): string[] {
  return segments.flatMap((s) => (s.kind === 'user' ? s.items : []));
}

describe('interleave', () => {
  it('gives one assistant segment with every part when nothing was merged', () => {
    const parts = [stepStart(), send('c1', 'hi'), stepStart(), text('done')];
    const out = interleave<string>(parts, []);
    expect(out).toEqual([{ kind: 'assistant', parts }]);
  });

  it('gives nothing for a turn without meaningful parts and no merges', () => {
    expect(interleave<string>([stepStart(), text('  ')], [])).toEqual([]);
    expect(interleave<string>([], [])).toEqual([]);
  });

  it('splits the assistant message at step 1 and puts the merged user messages between', () => {
    const parts = [stepStart(), send('c1', 'hi'), stepStart(), text('done')];
    const out = interleave(parts, [{ stepNumber: 1, items: ['u2', 'u3'] }]);
    expect(out).toEqual([
      { kind: 'assistant', parts: [parts[0], parts[1]] },
      { kind: 'user', items: ['u2', 'u3'] },
      { kind: 'assistant', parts: [parts[2], parts[3]] },
    ]);
  });

  it('places merges at steps 1 and 2 each before its own step', () => {
    const parts = [stepStart(), send('c1', 'a'), stepStart(), send('c2', 'b'), stepStart(), text('done')];
    const out = interleave(parts, [
      { stepNumber: 1, items: ['u2'] },
      { stepNumber: 2, items: ['u3'] },
    ]);
    expect(layout(out)).toEqual([
      'A:|,tool-chat_send(c1)',
      'U:u2',
      'A:|,tool-chat_send(c2)',
      'U:u3',
      'A:|,t(done)',
    ]);
  });

  it('orders merges by step number whatever order they are given in', () => {
    const parts = [stepStart(), send('c1', 'a'), stepStart(), send('c2', 'b'), stepStart(), text('done')];
    const merges: MergePoint<string>[] = [
      { stepNumber: 2, items: ['u3'] },
      { stepNumber: 1, items: ['u2'] },
    ];
    const out = interleave(parts, merges);
    expect(layout(out)).toEqual([
      'A:|,tool-chat_send(c1)',
      'U:u2',
      'A:|,tool-chat_send(c2)',
      'U:u3',
      'A:|,t(done)',
    ]);
    // The caller's array is not reordered.
    expect(merges.map((m) => m.stepNumber)).toEqual([2, 1]);
  });

  it('drops the trailing assistant segment when the step after the merge produced only empty text', () => {
    const parts = [stepStart(), send('c1', 'hi'), stepStart(), text('')];
    const out = interleave(parts, [{ stepNumber: 1, items: ['u2'] }]);
    expect(layout(out)).toEqual(['A:|,tool-chat_send(c1)', 'U:u2']);
  });

  it('drops a whitespace-only step after the merge as well', () => {
    const parts = [stepStart(), send('c1', 'hi'), stepStart(), text(' \n ')];
    const out = interleave(parts, [{ stepNumber: 1, items: ['u2'] }]);
    expect(out.at(-1)).toEqual({ kind: 'user', items: ['u2'] });
    expect(out).toHaveLength(2);
  });

  it('puts the user segment last when the merge step lies beyond the last step', () => {
    const parts = [stepStart(), send('c1', 'hi'), stepStart(), text('done')];
    const out = interleave(parts, [{ stepNumber: 5, items: ['u9'] }]);
    expect(out).toEqual([
      { kind: 'assistant', parts },
      { kind: 'user', items: ['u9'] },
    ]);
  });

  it('puts the user segment first when the merge happened before step 0', () => {
    const parts = [stepStart(), text('hello')];
    const out = interleave(parts, [{ stepNumber: 0, items: ['u1'] }]);
    expect(out).toEqual([
      { kind: 'user', items: ['u1'] },
      { kind: 'assistant', parts },
    ]);
  });

  it('treats parts before the first step-start as step 0', () => {
    const parts = [send('c1', 'a'), stepStart(), text('done')];
    const out = interleave(parts, [{ stepNumber: 1, items: ['u2'] }]);
    expect(layout(out)).toEqual(['A:tool-chat_send(c1)', 'U:u2', 'A:|,t(done)']);
  });

  it('never loses or duplicates a meaningful part or a merged item', () => {
    const parts = [
      stepStart(),
      text('thinking aloud'),
      send('c1', 'a'),
      stepStart(),
      send('c2', 'b'),
      stepStart(),
      text(''),
      stepStart(),
      send('c3', 'c'),
      text('final'),
    ];
    const cases: MergePoint<string>[][] = [
      [],
      [{ stepNumber: 1, items: ['x'] }],
      [
        { stepNumber: 1, items: ['x'] },
        { stepNumber: 2, items: ['y'] },
      ],
      [
        { stepNumber: 2, items: ['x'] },
        { stepNumber: 3, items: ['y', 'z'] },
      ],
      [
        { stepNumber: 0, items: ['x'] },
        { stepNumber: 9, items: ['y'] },
      ],
      [
        { stepNumber: 3, items: ['x'] },
        { stepNumber: 3, items: ['y'] },
      ],
    ];
    const meaningful = parts.filter(isMeaningful);
    for (const merges of cases) {
      const out = interleave(parts, merges);
      // Same meaningful parts (by identity), same order, each exactly once.
      expect(assistantParts(out).filter(isMeaningful)).toEqual(meaningful);
      for (const part of meaningful) {
        expect(assistantParts(out).filter((p) => p === part)).toHaveLength(1);
      }
      expect(userItems(out)).toEqual(
        [...merges].sort((a, b) => a.stepNumber - b.stepNumber).flatMap((m) => m.items),
      );
      // Parts keep their relative order across segments: no part comes back twice.
      const all = assistantParts(out);
      expect(new Set(all).size).toBe(all.length);
      // No assistant segment is empty of meaning.
      for (const seg of out) if (seg.kind === 'assistant') expect(seg.parts.some(isMeaningful)).toBe(true);
    }
  });
});
