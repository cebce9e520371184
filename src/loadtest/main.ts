import { writeFile } from 'node:fs/promises';
import { loadLoadtestEnv } from '../shared/config.js';
import { HELP, type LoadtestOptions, parseLoadtestArgs, UsageError } from './options.js';
import { progressPrinter } from './progress.js';
import { renderSummary } from './report.js';
import { runLoadtest } from './run.js';

/** `chatlane loadtest …`: exit 0 when every check held, 1 when one failed or the run aborted, 2 on bad usage. */
export async function loadtestMain(argv: string[]): Promise<number> {
  let opts: LoadtestOptions | 'help';
  try {
    opts = parseLoadtestArgs(argv, loadLoadtestEnv());
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`chatlane loadtest: ${err.message}\n(see chatlane loadtest --help)\n`);
    return 2;
  }
  if (opts === 'help') {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }

  const mode = opts.progress === 'auto' ? (process.stderr.isTTY ? 'tty' : 'plain') : opts.progress;
  const interrupt = new AbortController();
  let interrupted = 0;
  const onSignal = () => {
    interrupted++;
    if (interrupted > 1) process.exit(130);
    process.stderr.write(
      '\nchatlane loadtest: interrupted — stopping, checking what was sent (again to quit)\n',
    );
    interrupt.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const onProgress = progressPrinter(mode);
    const { report } = await runLoadtest(opts, {
      signal: interrupt.signal,
      ...(onProgress && { onProgress }),
      progressIntervalMs: 1000,
    });
    if (opts.out) await writeFile(opts.out, `${JSON.stringify(report, null, 2)}\n`);
    process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${renderSummary(report)}\n`);
    return report.ok ? 0 : 1;
  } catch (err) {
    process.stderr.write(`chatlane loadtest: ${(err as Error).message}\n`);
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
