import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

/**
 * Module hooks for the instrumentations that patch a package's exports (ioredis): in an ES
 * module graph only a loader hook sees `import 'ioredis'`. Only the named packages are
 * intercepted, and this runs before any role module is imported (src/cli.ts imports the
 * roles after tracing has started). Node's in-thread hooks where they work; the loader
 * thread (module.register) on older Nodes.
 */
export async function interceptModules(include: string[]): Promise<void> {
  const sync = await import('import-in-the-middle/register-hooks.mjs').catch(() => undefined);
  if (sync?.supportsSyncHooks()) {
    sync.register({ include });
    return;
  }
  const hook = createRequire(import.meta.url).resolve('import-in-the-middle/hook.mjs');
  register(pathToFileURL(hook), import.meta.url, { data: { include } });
}
