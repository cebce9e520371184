import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scripts } from '../../src/shared/store/scripts.js';

const LUA = resolve(import.meta.dirname, '../../src/shared/store/lua');

/** Calls that append an event (includes/events.lua, fence.lua's rejectFence, lease.lua's renewLease). */
const WRITES_EVENTS = /\b(addEvent|addEventJson|rejectFence|renewLease)\(/;

describe('scripts that record events', () => {
  it('are declared so (events: true) exactly when their Lua appends one, so every call names its event sink', () => {
    const wrong = Object.values(scripts)
      .filter((s) => WRITES_EVENTS.test(readFileSync(`${LUA}/${s.name}.lua`, 'utf8')) !== s.writesEvents)
      .map((s) => `${s.name}: declared ${s.writesEvents}`);
    expect(wrong).toEqual([]);
  });
});
