import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { luaModule, TARGET } from '../../scripts/lua-modules.mjs';
import { LUA_SOURCES } from '../../src/shared/store/lua-sources.js';

describe('the Lua scripts compiled into a module', () => {
  it('src/shared/store/lua-sources.ts is what scripts/lua-modules.mjs makes of lua/*.lua now (npm run build regenerates it)', () => {
    expect(readFileSync(TARGET, 'utf8')).toBe(luaModule());
  });

  it('every script has its includes inlined: no @include line is left for Redis to read as a comment', () => {
    const withInclude = Object.entries(LUA_SOURCES).filter(([, source]) => source.includes('-- @include'));
    expect(withInclude.map(([name]) => name)).toEqual([]);
    expect(LUA_SOURCES.acquire).toContain('local function nowMs()');
  });
});
