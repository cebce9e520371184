import { describe, expect, it } from 'vitest';
import { CappedOutput } from '../../src/worker/shell/capped-output.js';

describe("a command's output, capped", () => {
  it('keeps everything up to the cap', () => {
    const out = new CappedOutput(10);
    out.push(Buffer.from('hello'));
    out.push(Buffer.from('world'));
    expect(out.text()).toBe('helloworld');
    expect(out.dropped).toBe(0);
  });

  it('keeps the first and the last halves of more, and says how much was left out', () => {
    const out = new CappedOutput(10);
    for (const chunk of ['abc', 'defgh', 'ijklmnop', 'qrstuvwxyz']) out.push(Buffer.from(chunk));
    expect(out.total).toBe(26);
    expect(out.dropped).toBe(16);
    expect(out.text()).toBe('abcde\n[... 16 bytes left out ...]\nvwxyz');
  });

  it('holds about twice the cap however much is pushed (5 MB in 64 KB chunks, cap 16 KB)', () => {
    const out = new CappedOutput(16_384);
    const chunk = Buffer.alloc(65_536, 'x');
    let most = 0;
    for (let i = 0; i < 80; i++) {
      out.push(chunk);
      const held = (out as unknown as { tail: Buffer[] }).tail.reduce((n, b) => n + b.length, 0);
      most = Math.max(most, held);
    }
    expect(out.total).toBe(80 * 65_536);
    // The tail is cut back once it passes twice its half; one chunk may ride on top.
    expect(most).toBeLessThanOrEqual(2 * 8192 + 65_536);
    expect(Buffer.byteLength(out.text())).toBeLessThan(16_384 + 64);
  });
});
