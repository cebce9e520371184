import { spawn } from 'node:child_process';

/**
 * The demo's last act: `chatlane loadtest` for 10 seconds against the demo's own ingress
 * and mock model, as a separate process talking HTTP only — what a user would run against
 * their deployment. Resolves to its exit code (0 when every check held).
 */
export function demoLoadtest(ingressUrl: string, mockUrl: string): Promise<number> {
  const cli = process.argv[1];
  if (!cli) return Promise.resolve(1);
  const args = [
    cli,
    'loadtest',
    '--url',
    ingressUrl,
    '--mock-url',
    mockUrl,
    '--chats',
    '50',
    '--messages',
    '4',
    '--rate',
    '20',
    '--bursts',
    '0.3',
    '--duration',
    '10',
    '--drain',
    '30',
    '--progress',
    process.stderr.isTTY ? 'tty' : 'plain',
  ];
  console.log('\n── loadtest: 50 chats × 4 messages at 20 messages/s for 10 s (chatlane loadtest)\n');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: 'inherit' });
    child.once('error', () => resolve(1));
    child.once('exit', (code) => resolve(code ?? 1));
  });
}
