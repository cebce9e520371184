import { writeFileSync } from 'node:fs';
import { configurationMarkdown } from '../src/shared/config-reference.js';

/** `npm run docs:config`: regenerates docs/configuration.md from the config schema. */
const target = new URL('../docs/configuration.md', import.meta.url);
writeFileSync(target, configurationMarkdown());
process.stdout.write(`wrote ${target.pathname}\n`);
