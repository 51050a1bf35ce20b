import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import os from 'node:os';
import { ADMIN_SECRET, IMAGE_URL_SIGNING_KEY, SERVICE_TOKEN } from './test-gateway';

export const MAIN_JS = path.resolve(__dirname, '../../dist/src/main.js');

export interface GatewayProcess {
  url: string;
  /** The internal creative API's listener. */
  internalUrl: string;
  child: ChildProcess;
  output: string[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** The environment of a test gateway process: ports 0 on localhost, the test secrets, then `env` (`undefined` leaves a variable out). */
export function gatewayProcessEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    NODE_ENV: 'test',
    PORT: '0',
    INTERNAL_PORT: '0',
    HOST: '127.0.0.1',
    ADMIN_SECRET,
    CF_ACCESS_CLIENT_ID: SERVICE_TOKEN['CF-Access-Client-Id'],
    CF_ACCESS_CLIENT_SECRET: SERVICE_TOKEN['CF-Access-Client-Secret'],
    // Shedding has its own tests (test/http/load-shedding.test.ts): on a loaded test machine a stall
    // would refuse requests a test expects served.
    SHED_EVENT_LOOP_DELAY_MS: '0',
    SHED_DATABASE_WAIT_MS: '0',
    // Reservations still go through the bounded path (its own database handle on PostgreSQL), with a
    // bound past the database deadline: a stalled test machine must not refuse them as overloaded.
    ADMISSION_DATABASE_WAIT_MS: '60000',
    LOG_LEVEL: 'info',
    // Replicas share the keys (nothing is generated into the work tree), and keep images out of it.
    IMAGE_URL_SIGNING_KEY,
    CHANNEL_SEALING_KEY: 'c0'.repeat(32),
    IMAGE_DIRECTORY: path.join(os.tmpdir(), 'cgw-test-process-images'),
    // The fake upstreams listen on 127.0.0.1.
    CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'true',
    ...env,
  };
}

export interface ProcessOptions {
  /** What to run instead of `node dist/src/main.js` (e.g. `npm start`, or a shell that lowers limits first). */
  command?: [string, ...string[]];
  /** In its own process group (pid = group id), so a test can check that nothing of it is left. */
  detached?: boolean;
  /** Working directory (the data directory, `./data`, is relative to it); the repository's root by default. */
  cwd?: string;
}

/** Runs the built gateway (`dist/`, made by jest's global setup) as a real process on port 0. */
export function startGatewayProcess(env: Record<string, string | undefined>, options: ProcessOptions = {}): Promise<GatewayProcess> {
  const [command, ...args] = options.command ?? [process.execPath, MAIN_JS];
  const child = spawn(command, args, {
    cwd: options.cwd ?? path.resolve(__dirname, '../..'),
    detached: options.detached ?? false,
    env: gatewayProcessEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      if (options.detached && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      else child.kill('SIGKILL');
      reject(new Error(`gateway did not start:\n${output.join('')}`));
    }, 20_000);
    let seen = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      output.push(text);
      seen += text;
      const listening = seen.split('\n').find((line) => line.includes('"msg":"gateway listening"'));
      if (!listening) return;
      child.stdout.off('data', onData);
      child.stdout.on('data', (more: Buffer) => output.push(more.toString()));
      clearTimeout(timer);
      resolve({
        url: `http://127.0.0.1:${/"port":(\d+)/.exec(listening)?.[1]}`,
        internalUrl: `http://127.0.0.1:${/"internal_port":(\d+)/.exec(listening)?.[1]}`,
        child,
        output,
        async stop(signal: NodeJS.Signals = 'SIGTERM') {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
      });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code}:\n${output.join('')}`));
    });
  });
}
