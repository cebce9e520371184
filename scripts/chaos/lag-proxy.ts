import { createConnection, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a primary, on 127.0.0.2 and the primary's own port, that can make
 * its replica fall behind: `stall()` holds back what the primary sends on replication links
 * (connections that said REPLCONF) while every other connection flows. SIGSTOP on the
 * replica cannot do that: the kernel keeps receiving into its socket buffer, so a resumed
 * replica has everything. `cut()` drops the held bytes and every open link, as a crash of
 * the primary's host would.
 */

export interface LagProxy {
  host: string;
  port: number;
  stall(): void;
  cut(): void;
  close(): Promise<void>;
}

export const PROXY_HOST = '127.0.0.2';

export async function lagProxy(primaryPort: number): Promise<LagProxy> {
  let stalled = false;
  const links = new Set<Socket>();
  const server = createServer((down) => {
    const up = createConnection({ host: '127.0.0.1', port: primaryPort });
    links.add(down);
    links.add(up);
    let replication = false;
    const end = () => {
      down.destroy();
      up.destroy();
      links.delete(down);
      links.delete(up);
    };
    down.on('error', end);
    up.on('error', end);
    down.on('close', end);
    up.on('close', end);
    down.on('data', (chunk) => {
      if (!replication && chunk.includes('REPLCONF')) replication = true;
      up.write(chunk);
    });
    up.on('data', (chunk) => {
      if (replication && stalled) return;
      down.write(chunk);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(primaryPort, PROXY_HOST, () => resolve());
  });
  return {
    host: PROXY_HOST,
    port: primaryPort,
    stall: () => {
      stalled = true;
    },
    cut: () => {
      for (const s of links) s.destroy();
      links.clear();
      stalled = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of links) s.destroy();
        server.close(() => resolve());
      }),
  };
}
