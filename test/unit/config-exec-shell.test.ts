import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/shared/config.js';

function configErrorOf(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

describe('exec_shell configuration', () => {
  it('is off by default, with no network and no read-only directories', () => {
    expect(loadConfig({})).toMatchObject({
      EXEC_SHELL: 'off',
      EXEC_SHELL_TIMEOUT_MS: 30_000,
      EXEC_SHELL_OUTPUT_MAX_BYTES: 16_384,
      EXEC_SHELL_MAX_PROCESSES: 64,
      EXEC_SHELL_MEMORY_MAX_BYTES: 1024 * 1024 * 1024,
      EXEC_SHELL_WORKSPACE_MAX_BYTES: 8 * 1024 * 1024,
      EXEC_SHELL_NETWORK: [],
      EXEC_SHELL_READONLY_DIRS: [],
    });
  });

  it('takes EXEC_SHELL=approve (every command waits for a person) and refuses any other value, naming EXEC_SHELL', () => {
    expect(loadConfig({ EXEC_SHELL: 'approve' }).EXEC_SHELL).toBe('approve');
    expect(configErrorOf({ EXEC_SHELL: 'yes' })).toMatch(/^ {2}EXEC_SHELL: must be off, approve or on$/m);
  });

  it('reads EXEC_SHELL_NETWORK as hosts with their ports: a bare name allows 80 and 443', () => {
    const config = loadConfig({
      EXEC_SHELL_NETWORK: 'PyPI.org, files.pythonhosted.org:443,*.github.com,pypi.org:8080',
    });
    expect(config.EXEC_SHELL_NETWORK).toEqual([
      { host: 'pypi.org', ports: [80, 443, 8080] },
      { host: 'files.pythonhosted.org', ports: [443] },
      { host: '*.github.com', ports: [80, 443] },
    ]);
  });

  it.each([
    'http://pypi.org',
    'pypi.org/simple',
    '*',
    '*.',
    'pypi.org:0',
    'pypi.org:70000',
    '[::1]:443',
    'a..b',
  ])('refuses the EXEC_SHELL_NETWORK entry %j naming the variable', (entry) => {
    expect(configErrorOf({ EXEC_SHELL_NETWORK: entry })).toMatch(/^ {2}EXEC_SHELL_NETWORK: /m);
  });

  it('reads EXEC_SHELL_READONLY_DIRS as absolute directories, normalized', () => {
    expect(
      loadConfig({ EXEC_SHELL_READONLY_DIRS: '/srv/repo/, /opt/data//set' }).EXEC_SHELL_READONLY_DIRS,
    ).toEqual(['/srv/repo', '/opt/data/set']);
  });

  it.each(['srv/repo', '/', '/srv/../etc', '/workspace', '/workspace/x', '/proc', '/dev/shm', '/run'])(
    'refuses the read-only directory %j naming EXEC_SHELL_READONLY_DIRS',
    (dir) => {
      expect(configErrorOf({ EXEC_SHELL_READONLY_DIRS: dir })).toMatch(/^ {2}EXEC_SHELL_READONLY_DIRS: /m);
    },
  );

  it('needs EXEC_SHELL_TIMEOUT_MS below LLM_TIMEOUT_MS when on (a command runs inside a model step)', () => {
    expect(configErrorOf({ EXEC_SHELL: 'on', EXEC_SHELL_TIMEOUT_MS: '120000' })).toMatch(
      /^ {2}EXEC_SHELL_TIMEOUT_MS: must be below LLM_TIMEOUT_MS \(120000\)/m,
    );
    expect(loadConfig({ EXEC_SHELL: 'off', EXEC_SHELL_TIMEOUT_MS: '120000' }).EXEC_SHELL_TIMEOUT_MS).toBe(
      120_000,
    );
    expect(loadConfig({ EXEC_SHELL: 'on', EXEC_SHELL_TIMEOUT_MS: '60000' }).EXEC_SHELL_TIMEOUT_MS).toBe(
      60_000,
    );
  });

  it.each([
    ['EXEC_SHELL_TIMEOUT_MS', '50'],
    ['EXEC_SHELL_TIMEOUT_MS', '600001'],
    ['EXEC_SHELL_OUTPUT_MAX_BYTES', '10'],
    ['EXEC_SHELL_MAX_PROCESSES', '2'],
    ['EXEC_SHELL_MEMORY_MAX_BYTES', '1000'],
    ['EXEC_SHELL_WORKSPACE_MAX_BYTES', '1000'],
  ])('refuses %s=%s naming it', (name, value) => {
    expect(configErrorOf({ [name]: value })).toMatch(new RegExp(`^ {2}${name}: `, 'm'));
  });
});
