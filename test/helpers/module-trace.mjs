/**
 * `node --import <this file>`: appends every module URL the process resolves through `import`
 * (static or dynamic) to the file named by CHATLANE_MODULE_TRACE, one a line, and on exit the
 * CommonJS modules it loaded with `require` (which the resolve hook does not see). The same
 * file registers itself as the hooks module; the hooks run on Node's loader thread.
 */
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { isMainThread } from 'node:worker_threads';

let out;

export function initialize(data) {
  out = data.out;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(out, `${resolved.url}\n`);
  return resolved;
}

if (isMainThread && process.env.CHATLANE_MODULE_TRACE) {
  const out = process.env.CHATLANE_MODULE_TRACE;
  register(import.meta.url, { data: { out } });
  const { cache } = createRequire(import.meta.url);
  process.on('exit', () => {
    appendFileSync(
      out,
      Object.keys(cache)
        .map((path) => `${pathToFileURL(path).href}\n`)
        .join(''),
    );
  });
}
