import { spawn } from 'node:child_process';
import net from 'node:net';

/**
 * Upstreams that fail in the connect phase or just after it, on localhost only:
 * - `blackholedUpstream`: a listening socket whose owner is stopped (SIGSTOP) and whose accept queue is
 *   full, so the kernel drops new SYNs and a connect neither succeeds nor fails (as behind a firewall
 *   that drops packets);
 * - `silentUpstream`: accepts the connection and reads the request, never answers.
 */
export interface TestUpstream {
  url: string;
  close(): Promise<void>;
}

const LISTENER = `
const server = require('node:net').createServer(() => {});
server.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => process.stdout.write(String(server.address().port) + '\\n'));
`;

/** Whether a connect to the port completes within `ms`. */
function connects(port: number, ms: number, held: net.Socket[]): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    held.push(socket);
    const timer = setTimeout(() => resolve(false), ms);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(true);
    });
    socket.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

export async function blackholedUpstream(): Promise<TestUpstream> {
  const child = spawn(process.execPath, ['-e', LISTENER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
    child.once('exit', (code) => reject(new Error(`listener exited with ${code}`)));
  });
  child.kill('SIGSTOP');
  // Fill the accept queue (backlog 1: the kernel queues a few); bounded: at most 16 tries.
  const held: net.Socket[] = [];
  let full = false;
  for (let i = 0; i < 16 && !full; i += 1) full = !(await connects(port, 300, held));
  if (!full) throw new Error('could not fill the listen backlog');
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of held) socket.destroy();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}

export async function silentUpstream(): Promise<TestUpstream & { requests: () => number }> {
  let requests = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk) => {
      if (chunk.toString('latin1').startsWith('POST ')) requests += 1;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    requests: () => requests,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
