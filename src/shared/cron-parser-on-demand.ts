import { createRequire, Module } from 'node:module';

/**
 * Loads cron-parser (and with it luxon) only when a cron pattern is used: together ~0.8 MB of
 * heap on every process (luxon's source alone 0.52 MB, two-byte), which BullMQ's job-scheduler
 * module requires when it loads, with `Worker` and `Queue`, but calls only to compute the next
 * run of a job scheduler with a cron `pattern`. chatlane's schedulers use `every`.
 *
 * How: before BullMQ loads (./bullmq.ts imports this module first), cron-parser's entry module
 * is put into the require cache as a stand-in whose exports forward every access to the real
 * module, loaded on the first one (which then replaces the stand-in in the cache). BullMQ reads
 * `CronExpressionParser` off those exports each time it parses a pattern, so a cron-pattern
 * scheduler works as before (test/integration/cron-scheduler.test.ts); anything else that
 * requires cron-parser gets the same forwarding exports. Nothing is replaced when cron-parser is
 * already loaded or cannot be found from BullMQ.
 */
const require = createRequire(import.meta.url);

function standIn(entry: string, load: () => object): Module {
  const forwarded = new Proxy(
    {},
    {
      get: (_, key) => Reflect.get(load(), key),
      has: (_, key) => Reflect.has(load(), key),
      ownKeys: () => Reflect.ownKeys(load()),
      // The empty target has no own properties, so each must be reported configurable.
      getOwnPropertyDescriptor: (_, key) => {
        const descriptor = Reflect.getOwnPropertyDescriptor(load(), key);
        return descriptor && { ...descriptor, configurable: true };
      },
    },
  );
  const module = new Module(entry);
  module.filename = entry;
  module.exports = forwarded;
  module.loaded = true;
  return module;
}

function install(): void {
  let entry: string;
  let requireFromBullmq: NodeJS.Require;
  try {
    requireFromBullmq = createRequire(require.resolve('bullmq/dist/cjs/classes/job-scheduler.js'));
    entry = requireFromBullmq.resolve('cron-parser');
  } catch {
    return;
  }
  if (require.cache[entry]) return;
  let real: object | undefined;
  const load = (): object => {
    if (!real) {
      delete require.cache[entry];
      real = requireFromBullmq('cron-parser') as object;
    }
    return real;
  };
  require.cache[entry] = standIn(entry, load);
}

install();
