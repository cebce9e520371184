// tsc compiles TypeScript only: the CLI is made executable. (The Lua scripts are compiled into
// src/shared/store/lua-sources.ts by scripts/lua-modules.mjs: nothing else ships beside dist/.)
import { chmodSync } from 'node:fs';

chmodSync('dist/cli.js', 0o755);
