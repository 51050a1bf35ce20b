import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { until } from './until';

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Resolves once something accepts TCP connections on the port (bounded by `deadlineMs`). */
async function waitForPort(port: number, deadlineMs = 20_000): Promise<void> {
  const open = (): Promise<boolean> =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
  await until(open, `something listening on ${port}`, deadlineMs);
}

/**
 * A Redis of the test's own on a free port (never the shared one), which the test may kill,
 * freeze (SIGSTOP) and start again on the same port.
 */
export class ThrowawayRedis {
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(port?: number): Promise<ThrowawayRedis> {
    const redis = new ThrowawayRedis(port ?? (await freePort()));
    await redis.start();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    await waitForPort(this.port);
  }

  /** Kills it (SIGKILL: a crash, connections cut without goodbye). */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** SIGSTOP / SIGCONT: a Redis that keeps its connections open but answers nothing. */
  freeze(): void {
    this.child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.child?.kill('SIGCONT');
  }
}

/** Runs a PostgreSQL tool without blocking the event loop (the gateway under test shares it). */
async function asPostgres(command: string, args: string[]): Promise<void> {
  // initdb and postgres refuse to run as root.
  const [file, fileArgs] = process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  await promisify(execFile)(file, fileArgs);
}

/**
 * A PostgreSQL cluster of the test's own (initdb + pg_ctl in a temp dir, on a free port), so the
 * test can stop and restart it without touching the shared server.
 */
export class ThrowawayPostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  static async start(): Promise<ThrowawayPostgres> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-pg-'));
    fs.chmodSync(dir, 0o777);
    const cluster = new ThrowawayPostgres(dir, await freePort());
    await asPostgres('initdb', ['-D', cluster.dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await cluster.start();
    return cluster;
  }

  private get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  /** The default database of the cluster. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
    await asPostgres('pg_ctl', ['-D', this.dataDir, '-l', path.join(this.dir, 'log'), '-o', options, '-w', 'start']);
    await waitForPort(this.port);
  }

  /** Fast shutdown: sessions are cut (57P01), new connections refused until start(). */
  async stop(): Promise<void> {
    await asPostgres('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', 'stop']);
  }

  /** The postmaster and every process it forked (backends, checkpointer...): a Linux /proc walk. */
  private processes(): number[] {
    const postmaster = Number(fs.readFileSync(path.join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = new Map<number, number[]>();
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        // The parent pid is the 2nd field after the command, which is in parentheses and may hold spaces.
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
        const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
      } catch {
        // exited meanwhile
      }
    }
    const all = [postmaster];
    for (let i = 0; i < all.length; i += 1) all.push(...(children.get(all[i] as number) ?? []));
    return all;
  }

  /**
   * SIGSTOP to the whole cluster: a hung server. Connections stay open and new ones are accepted by
   * the kernel, but nothing answers; what was sent runs when thaw() resumes it.
   */
  freeze(): void {
    this.signalAll('SIGSTOP');
  }

  thaw(): void {
    this.signalAll('SIGCONT');
  }

  /** A backend may exit between the /proc walk and its signal (a client closed its connection): that one needs none. */
  private signalAll(signal: NodeJS.Signals): void {
    for (const pid of this.processes()) {
      try {
        process.kill(pid, signal);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
  }

  async destroy(): Promise<void> {
    try {
      this.thaw();
    } catch {
      // not running
    }
    try {
      await this.stop();
    } catch {
      // already stopped
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Keeps `concurrency` clients sending until stopped; records every response. A client that
 * throws (the gateway went away: a failing test's cleanup) stops all of them; `until` and
 * `stop` then rethrow, so a failure fails the test instead of crashing the run.
 */
export class Traffic<R> {
  readonly results: R[] = [];
  private running = true;
  private failure: unknown;
  private readonly loops: Promise<void>[];

  constructor(send: () => Promise<R>, concurrency: number) {
    this.loops = Array.from({ length: concurrency }, async () => {
      try {
        while (this.running) this.results.push(await send());
      } catch (error) {
        this.failure ??= error;
        this.running = false;
      }
    });
  }

  /** Resolves once `predicate` holds for the responses recorded so far (bounded wait). */
  async until(predicate: (results: R[]) => boolean, what: string, deadlineMs = 20_000): Promise<void> {
    const started = Date.now();
    while (!predicate(this.results)) {
      if (this.failure !== undefined) throw this.failure;
      if (Date.now() - started > deadlineMs) {
        this.running = false;
        throw new Error(`traffic: ${what} did not happen within ${deadlineMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async stop(): Promise<R[]> {
    this.running = false;
    await Promise.all(this.loops);
    if (this.failure !== undefined) throw this.failure;
    return this.results;
  }
}
