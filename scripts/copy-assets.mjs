// tsc compiles TypeScript only; the Lua scripts ship beside the compiled store.
import { chmodSync, cpSync } from 'node:fs';

cpSync('src/shared/store/lua', 'dist/shared/store/lua', { recursive: true });
chmodSync('dist/cli.js', 0o755);
