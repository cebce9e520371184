// Imports the modules named on the command line and prints, as one JSON line, the files the
// imports read through node:fs (not the module loader's own reads), how long the imports took
// and the heap and RSS after them. For test/e2e/import-cost.test.ts.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';

const reads = [];
for (const name of ['readFileSync', 'readFile', 'openSync', 'open', 'readdirSync', 'createReadStream']) {
  const original = fs[name];
  fs[name] = function (path, ...rest) {
    reads.push(String(path));
    return original.call(this, path, ...rest);
  };
}
syncBuiltinESMExports();
const started = performance.now();
for (const specifier of process.argv.slice(2)) await import(specifier);
const ms = performance.now() - started;
const { rss, heapUsed } = process.memoryUsage();
console.log(JSON.stringify({ reads, ms, rssMB: rss / 2 ** 20, heapMB: heapUsed / 2 ** 20 }));
