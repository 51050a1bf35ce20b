// `npm run bench`: throughput and latency of the full gateway path against a bare Express 5 app,
// measured in one run on this machine with autocannon, then written to BENCHMARKS.md.
// The local provider runs in `tiny` mode (a fixed 1x1 PNG) so the provider costs ~0.
// Options: BENCH_SECONDS (default 10), BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (default 3), BENCH_SKIP_MILLION=1,
// BENCH_SKIP_PG=1, BENCH_CPU_PROF=1 (profiles to bench-profiles/), BENCH_NODE_FLAGS (extra node flags for the gateway),
// BENCH_THREADS=1 (prints each measured process's CPU per request by thread), BENCH_STDOUT=<prefix> (keeps the gateways' stdout).
// Flags: --only ROW[,ROW] (rows: sqlite10k, sqlite1m, postgres, upstream, upstream-pg, openai-compat, hop-matrix, overload, slow, slow-pg, analytics, guardrails), --rounds N, --seconds S,
// --analytics-keys N, --analytics-generations N, --analytics-days N (the analytics row's scale; default 100,000 / 10,000,000 / 90),
// --inflight N, --delay MS and --slow-targets gateway,gateway-async,express (the slow-generations rows), --ab PATH (another build's dist/src/main.js measured in the
// sqlite10k and upstream rounds too, for paired A/B; BENCH_AB_NODE_FLAGS gives that process node flags, BENCH_AB_ENV (JSON) extra environment, sqlite10k and upstream rows), --report-only. Each run merges its rows into bench-results/latest.json
// and rewrites BENCHMARKS.md's tables from it (rows not measured keep their last result, with its date).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import autocannon from 'autocannon';
import { measureAnalytics } from './bench-analytics.mjs';

const require = createRequire(import.meta.url);
// Before better-sqlite3 loads (native, built for Node >= 22: Node 20 crashes on it).
require('./supported-node.js').requireSupportedNode();
const root = path.resolve(import.meta.dirname, '..');
const flag = (name) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? undefined : process.argv[at + 1];
};
const SECONDS = Number(flag('seconds') ?? process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const FIXED_RATE = 1000;
const ROUNDS = Number(flag('rounds') ?? process.env.BENCH_ROUNDS ?? 3);
const ALL_ROWS = ['sqlite10k', 'sqlite1m', 'postgres', 'upstream', 'upstream-pg', 'openai-compat', 'hop-matrix', 'overload', 'slow', 'slow-pg', 'analytics', 'guardrails'];
const ONLY = new Set((flag('only') ?? ALL_ROWS.join(',')).split(','));
for (const row of ONLY) if (!ALL_ROWS.includes(row)) throw new Error(`--only: unknown row ${row} (rows: ${ALL_ROWS.join(', ')})`);
if (process.env.BENCH_SKIP_MILLION) ONLY.delete('sqlite1m');
// --report-only: measures nothing, rewrites BENCHMARKS.md's tables from bench-results/latest.json.
if (process.argv.includes('--report-only')) ONLY.clear();
if (process.env.BENCH_SKIP_PG) {
  ONLY.delete('postgres');
  ONLY.delete('upstream-pg');
  ONLY.delete('slow-pg');
  ONLY.delete('analytics');
}
const ADMIN_SECRET = 'bench-admin-secret-0123456789';
const SERVICE = { id: 'bench.access', secret: 'bench-service-secret-0123' };

execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
const { generateKeySecret, hashKey, keyHint } = require(path.join(root, 'dist/src/keys/key-secret.js'));

const BODY = JSON.stringify({ prompt: 'a lighthouse at dawn', model: 'local-1', response_format: 'b64_json' });

const children = new Set();
// A run that fails part-way leaves no server behind.
process.on('exit', () => children.forEach((child) => child.kill('SIGKILL')));
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));

/**
 * Starts a node process and resolves once it says where it listens. `options.nofile` raises its open-files
 * limit first (through the shell's ulimit; root may raise the hard limit too), for the slow-generations row.
 */
function startProcess(args, env, options = {}) {
  const cwd = options.cwd ?? root;
  // The gateway's port is read from its startup line, which it logs at info.
  if (!options.ready && /^(warn|error|fatal|silent)$/.test(env.LOG_LEVEL ?? '')) {
    return Promise.reject(new Error(`LOG_LEVEL=${env.LOG_LEVEL} hides the gateway's startup line, where the bench reads its port: use info or lower`));
  }
  const child = options.nofile
    ? spawn('bash', ['-c', `ulimit -n ${options.nofile} 2>/dev/null || ulimit -n hard; exec "$0" "$@"`, process.execPath, ...args], {
        cwd,
        env: { PATH: process.env.PATH, ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
    : spawn(process.execPath, args, { cwd, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')}: not listening after 120 s: ${buffer.slice(-500)}`));
    }, 120_000);
    const onData = (chunk) => {
      buffer += chunk.toString();
      const match = options.ready ? options.ready.exec(buffer) : (/"port":(\d+),"internal_port"/.exec(buffer) ?? /^listening (\d+)$/m.exec(buffer));
      if (match) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        // Discard the request logs, as a log shipper would; BENCH_STDOUT keeps them (and --trace-gc lines) in <prefix>.<pid>.
        if (process.env.BENCH_STDOUT) child.stdout.pipe(fs.createWriteStream(`${process.env.BENCH_STDOUT}.${child.pid}`));
        else child.stdout.resume();
        const internal = /"internal_port":(\d+)/.exec(buffer);
        resolve({ child, url: `http://127.0.0.1:${options.port ?? match[1]}`, internalUrl: internal ? `http://127.0.0.1:${internal[1]}` : undefined });
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`process exited with ${code}: ${buffer}`));
    });
  });
}

const stop = (child) =>
  new Promise((resolve) => {
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });

function rssMb(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024);
}

/** CPU seconds (user + system) the process has used so far, from /proc. */
function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** BENCH_THREADS: CPU ticks (user + system) by thread name (main thread, V8 workers: GC helpers, libuv workers). */
function threadCpu(pid) {
  const out = {};
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const comm = fs
        .readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8')
        .trim()
        .replace(/[0-9]+$/, '#');
      const f = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      out[comm] = (out[comm] ?? 0) + Number(f[11]) + Number(f[12]);
    } catch {
      // a thread that ended between the listing and the read
    }
  }
  return out;
}

/**
 * Closed-loop load at full speed (autocannon). Also returns the server's CPU time per request,
 * which is steadier across noisy runs than requests/s.
 */
async function load(url, keys, options = {}) {
  const cpuBefore = options.pid ? cpuSeconds(options.pid) : 0;
  const threadsBefore = options.pid && process.env.BENCH_THREADS ? threadCpu(options.pid) : undefined;
  let i = 0;
  const result = await autocannon({
    url: `${url}${options.path ?? '/images/generate'}`,
    method: 'POST',
    connections: options.connections ?? CONNECTIONS,
    duration: options.seconds ?? SECONDS,
    ...(options.rate ? { overallRate: options.rate } : {}),
    headers: { 'content-type': 'application/json', ...options.headers },
    body: options.body ?? BODY,
    requests: [
      {
        setupRequest: (request) => {
          const key = keys[i++ % keys.length];
          return key ? { ...request, headers: { ...request.headers, authorization: `Bearer ${key}` } } : request;
        },
      },
    ],
  });
  const bad = result.non2xx + result.errors + result.timeouts;
  const cpuUs = options.pid ? Math.round(((cpuSeconds(options.pid) - cpuBefore) * 1e6) / result.requests.total) : undefined;
  if (threadsBefore) {
    const perRequest = Object.entries(threadCpu(options.pid)).map(([name, ticks]) => [
      name,
      Math.round(((ticks - (threadsBefore[name] ?? 0)) * 1e4) / result.requests.total),
    ]);
    console.log('cpu µs/req by thread', options.pid, JSON.stringify(Object.fromEntries(perRequest.filter(([, us]) => us > 0))));
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, bad, total: result.requests.total, cpuUs };
}

/**
 * Open-loop load at a fixed rate, evenly spaced (one request every 1000/rate ms, over a pool of
 * keep-alive sockets). autocannon's overallRate is not that: each connection sends its quota for
 * the second back to back at the start of every second, so its latencies measure bursts.
 * Latency counts from when a request was due, not when it was sent (no coordinated omission).
 */
async function paced(url, keys, rate, seconds, options = {}) {
  // Two seconds at the same rate first, not counted: a server idle for the rounds before (the baseline's, Portkey's)
  // has let its keep-alive and database connections close and, for the gateway, compacted its heap (idle compaction);
  // the target is the latency of a steady 400 req/s, not of its first second after a pause.
  await pacedOnce(url, keys, rate, Math.min(2, seconds), options);
  return pacedOnce(url, keys, rate, seconds, options);
}

async function pacedOnce(url, keys, rate, seconds, options = {}) {
  const cpuBefore = options.pid ? cpuSeconds(options.pid) : 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 256 });
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const latencies = [];
  // Per answer status (or connection error code): the latencies of those answers, for the overload row.
  const byStatus = {};
  // The same from when the request got its socket (the client's own wait for one left out): the server's answer time.
  const servedByStatus = {};
  let bad = 0;
  const badStatuses = {};
  const started = performance.now();
  await new Promise((resolve) => {
    let sent = 0;
    let done = 0;
    const finish = (due, ok, status, sentAt) => {
      const now = performance.now();
      const latency = now - due;
      latencies.push(latency);
      (byStatus[status] ??= []).push(latency);
      if (sentAt !== undefined) (servedByStatus[status] ??= []).push(now - sentAt);
      if (!ok) {
        bad += 1;
        badStatuses[status] = (badStatuses[status] ?? 0) + 1;
      }
      if (++done === total) resolve();
    };
    const tick = () => {
      const dueNow = Math.min(total, Math.floor((performance.now() - started) / interval) + 1);
      for (; sent < dueNow; sent += 1) {
        const due = started + sent * interval;
        const key = keys[sent % keys.length];
        const request = http.request(`${url}${options.path ?? '/images/generate'}`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', ...options.headers, ...(key ? { authorization: `Bearer ${key}` } : {}) },
        });
        let sentAt;
        request.on('socket', () => {
          sentAt = performance.now();
        });
        request.on('response', (response) => {
          // options.errorCodes: a refusal is counted under its status and error code (`503 overloaded`).
          const chunks = [];
          if (options.errorCodes && response.statusCode !== 200) response.on('data', (chunk) => chunks.push(chunk));
          else response.resume();
          response.on('end', () => {
            let status = response.statusCode;
            if (chunks.length > 0) {
              try {
                status = `${status} ${JSON.parse(Buffer.concat(chunks).toString()).error.code}`;
              } catch {
                // Not the error envelope: the status alone.
              }
            }
            finish(due, response.statusCode === 200, status, sentAt);
          });
        });
        request.on('error', (error) => finish(due, false, error.code ?? 'error'));
        request.end(options.body ?? BODY);
      }
      if (sent < total) setTimeout(tick, Math.max(0, started + sent * interval - performance.now()));
    };
    tick();
  });
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const cpuUs = options.pid ? Math.round(((cpuSeconds(options.pid) - cpuBefore) * 1e6) / total) : undefined;
  const at = (q, sorted = latencies) => Number(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(2));
  const statuses = Object.fromEntries(
    Object.entries(byStatus).map(([status, values]) => {
      values.sort((a, b) => a - b);
      const served = (servedByStatus[status] ?? []).sort((a, b) => a - b);
      return [
        status,
        {
          count: values.length,
          p50: at(0.5, values),
          p99: at(0.99, values),
          max: at(1, values),
          ...(served.length ? { servedP50: at(0.5, served), servedP99: at(0.99, served) } : {}),
        },
      ];
    }),
  );
  return {
    rps: rate,
    p50: at(0.5),
    p99: at(0.99),
    bad,
    ...(bad ? { badStatuses } : {}),
    total,
    cpuUs,
    statuses,
    seconds: (performance.now() - started) / 1000,
  };
}

/** Inserts `count` keys straight into SQLite (far faster than the API) and returns their secrets. */
function seedSqlite(file, count, keep, providers = '["local"]') {
  const Database = require('better-sqlite3');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  const insert = db.prepare(`INSERT INTO api_keys (id, key_hash, hint, name, owner, status, credits_quota, credits_used, quota_period_days,
    period_started_at, rate_limit_rpm, allowed_providers, expires_at, created_at, updated_at, disabled_at, last_used_at)
    VALUES (?, ?, ?, 'bench', ?, 'active', 1000000000, 0, 30, ?, 100000, ?, NULL, ?, ?, NULL, NULL)`);
  const secrets = [];
  const now = Date.now();
  const batch = db.transaction((n, offset) => {
    for (let j = 0; j < n; j += 1) {
      const secret = generateKeySecret();
      if (secrets.length < keep) secrets.push(secret);
      insert.run(
        `key_bench${offset + j}${randomBytes(4).toString('hex')}`,
        hashKey(secret),
        keyHint(secret),
        `owner-${(offset + j) % 1000}`,
        now,
        providers,
        now,
        now,
      );
    }
  });
  for (let offset = 0; offset < count; offset += 50_000) batch(Math.min(50_000, count - offset), offset);
  db.close();
  return secrets;
}

async function seedPostgres(url, count, providers = '["local"]') {
  const { Client } = require('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  const secrets = [];
  const now = Date.now();
  for (let offset = 0; offset < count; offset += 1000) {
    const values = [];
    const params = [];
    for (let j = 0; j < Math.min(1000, count - offset); j += 1) {
      const secret = generateKeySecret();
      secrets.push(secret);
      params.push(`key_bench${offset + j}`, hashKey(secret), keyHint(secret), now, providers);
      const b = params.length - 5;
      values.push(
        `($${b + 1}, $${b + 2}, $${b + 3}, 'bench', 'bench', 'active', 1000000000, 0, 30, $${b + 4}, 100000, $${b + 5}, NULL, $${b + 4}, $${b + 4}, NULL, NULL)`,
      );
    }
    await client.query(`INSERT INTO api_keys VALUES ${values.join(',')}`, params);
  }
  await client.end();
  return secrets;
}

const gatewayEnv = (databaseUrl, extra = {}) => ({
  NODE_ENV: 'production',
  PORT: '0',
  INTERNAL_PORT: '0',
  HOST: '127.0.0.1',
  ADMIN_SECRET,
  CF_ACCESS_CLIENT_ID: SERVICE.id,
  CF_ACCESS_CLIENT_SECRET: SERVICE.secret,
  DATABASE_URL: databaseUrl,
  LOCAL_PROVIDER_MODE: 'tiny',
  LOG_LEVEL: 'info',
  CHANNEL_SEALING_KEY: 'b'.repeat(64),
  // Every generated image is stored (docs/clients/image-storage.md): in a scratch directory here.
  IMAGE_URL_SIGNING_KEY: 'bench-image-url-signing-key-0123456789abcdef',
  IMAGE_DIRECTORY: path.join(os.tmpdir(), 'cgw-bench-images'),
  ...extra,
});

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

/**
 * One setup against the baseline, in ROUNDS alternating pairs (baseline, then gateway) so both see
 * the same machine weather; medians of each. The baseline server stays up for the whole run.
 */
async function measureAgainstBaseline(name, baseline, env, keys, ab = undefined) {
  const { child, url } = await startProcess(gatewayCommand(), env);
  // --ab: the other build on its own copy of the database, measured in the same rounds, alternating which goes first.
  const other = ab ? await startProcess([...AB_NODE_FLAGS, AB], ab.env) : undefined;
  await load(url, keys, { connections: 10 }); // warm-up: JIT, caches, connection pools
  if (other) await load(other.url, ab.keys, { connections: 10 });
  const pairs = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const pair = { baseMax: await load(baseline.url, [], { pid: baseline.child.pid }) };
    const thisFirst = round % 2 === 0;
    if (other && !thisFirst) pair.abMax = await load(other.url, ab.keys, { pid: other.child.pid });
    pair.max = await load(url, keys, { pid: child.pid });
    if (other && thisFirst) pair.abMax = await load(other.url, ab.keys, { pid: other.child.pid });
    pair.basePaced = await paced(baseline.url, [], FIXED_RATE, SECONDS);
    // --ab: the other build takes the fixed-rate phase too, in the same order, so both spend each round alike.
    if (other && !thisFirst) await paced(other.url, ab.keys, FIXED_RATE, SECONDS);
    pair.paced = await paced(url, keys, FIXED_RATE, SECONDS);
    if (other && thisFirst) await paced(other.url, ab.keys, FIXED_RATE, SECONDS);
    pairs.push(pair);
    console.log(name, `round ${round + 1}`, JSON.stringify(pair));
  }
  if (other) await stop(other.child);
  const burst = await load(url, keys, { rate: FIXED_RATE, connections: 20 });
  const rss = rssMb(child.pid);
  await stop(child);
  const m = (pick) => median(pairs.map(pick));
  return {
    rps: m((p) => p.max.rps),
    baseRps: m((p) => p.baseMax.rps),
    cpuUs: m((p) => p.max.cpuUs),
    baseCpuUs: m((p) => p.baseMax.cpuUs),
    p50: m((p) => p.max.p50),
    p99: m((p) => p.max.p99),
    pacedP50: m((p) => p.paced.p50),
    pacedP99: m((p) => p.paced.p99),
    basePacedP99: m((p) => p.basePaced.p99),
    burstP99: burst.p99,
    rss,
    bad: pairs.reduce((sum, p) => sum + p.max.bad + p.paced.bad, 0) + burst.bad,
    ...(other
      ? {
          ab: {
            build: AB,
            rps: m((p) => p.abMax.rps),
            cpuUs: m((p) => p.abMax.cpuUs),
            cpuRatioPerRound: pairs.map((p) => Math.round((p.max.cpuUs / p.abMax.cpuUs) * 100) / 100),
            cpuRatio: m((p) => p.max.cpuUs / p.abMax.cpuUs),
          },
        }
      : {}),
  };
}

const UPSTREAM_RATE = 400;
const UPSTREAM_CONNECTIONS = 32;
const UPSTREAM_BODY = JSON.stringify({ prompt: 'a lighthouse at dawn', model: 'jimeng-4.5', response_format: 'b64_json' });
/** Portkey speaks OpenAI's API: the same generation, sent to the fake through its custom-host header. */
const PORTKEY_BODY = JSON.stringify({ prompt: 'a lighthouse at dawn', model: 'doubao-seedream-4-5-251128', size: '2048x2048', response_format: 'b64_json' });

function freePort() {
  return new Promise((resolve) => {
    const server = http.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// The env channel's concurrency cap (default 16) is raised above the connections, so it is checked but not the bottleneck.
const upstreamEnv = (databaseUrl, fakeUrl, extra = {}) =>
  gatewayEnv(databaseUrl, { ARK_API_KEY: 'bench-ark-key', ARK_BASE_URL: fakeUrl, PROVIDER_JIMENG_MAX_CONCURRENCY: '64', ...extra });
/** --ab PATH: a second gateway build (its dist/src/main.js) measured in the same rounds, for paired A/B runs. */
const AB = flag('ab');
/**
 * The node flags `npm start` runs the gateway with (package.json's start script, their one home): the bench measures
 * what operators run. BENCH_AB_NODE_FLAGS replaces them for the --ab process (empty: node's defaults).
 */
const GATEWAY_NODE_FLAGS = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).scripts.start.split(' ').filter((word) => word.startsWith('--'));
/** BENCH_AB_NODE_FLAGS: node flags for the --ab process only (a paired A/B of V8 settings on one build). */
const AB_NODE_FLAGS = (process.env.BENCH_AB_NODE_FLAGS ?? '').split(' ').filter(Boolean);

/** A scratch database for the gateway, schema made by the gateway itself (`main`: another build's, for --ab), seeded with `count` keys. */
async function scratchDatabase(kind, count, providers, main = 'dist/src/main.js') {
  if (kind === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-bench-'));
    const file = path.join(dir, 'gateway.db');
    const { child } = await startProcess([main], gatewayEnv(file));
    await stop(child);
    return { url: file, keys: seedSqlite(file, count, count, providers), env: {}, drop: async () => fs.rmSync(dir, { recursive: true, force: true }) };
  }
  const { Client } = require('pg');
  const admin = new Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  const name = `cgw_bench_${Date.now()}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = `postgres://postgres@127.0.0.1:5432/${name}`;
  const env = { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: `${name}:`, DB_POOL_SIZE: '20' };
  const { child } = await startProcess([main], gatewayEnv(url, env));
  await stop(child);
  const keys = await seedPostgres(url, count, providers);
  return {
    url,
    keys,
    env,
    drop: async () => {
      await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/** How long the upstream row waits after its load before reading the gateway's RSS a second time. */
const IDLE_AFTER_LOAD_MS = 30_000;

/**
 * The peers every upstream row is measured beside: the fake upstream (`fakeEnv` picks its wire), the
 * bare Express + fetch proxy in front of it, and Portkey's gateway when it is installed.
 */
async function startPeers(fakeEnv) {
  const fake = await startProcess(['scripts/bench-fake-ark.cjs'], fakeEnv);
  const proxy = await startProcess(['scripts/bench-proxy-baseline.cjs'], { UPSTREAM_URL: fake.url });
  const portkeyDir = path.join(root, 'node_modules/@portkey-ai/gateway');
  let portkey;
  if (fs.existsSync(portkeyDir)) {
    const port = await freePort();
    portkey = await startProcess(
      ['build/start-server.js', `--port=${port}`, '--headless'],
      { NODE_ENV: 'production' },
      { cwd: portkeyDir, ready: /Ready for connections/, port },
    ).catch((error) => {
      console.log(`Portkey's gateway did not start (${error.message}); its figures stay empty`);
      return undefined;
    });
  }
  return { fake, proxy, portkey };
}

/**
 * The upstream path: gateway -> fake Ark (b64 answers), against a bare Express 5 + global fetch proxy and
 * Portkey's gateway on the same fake, in alternating rounds; 32 connections, 1,000 keys; then p99 at a fixed
 * 400 req/s for the gateway and the Express proxy.
 */
async function measureUpstream(name, kind) {
  const { fake, proxy, portkey } = await startPeers({});
  const portkeyOptions = {
    path: '/v1/images/generations',
    body: PORTKEY_BODY,
    headers: { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': fake.url },
    connections: UPSTREAM_CONNECTIONS,
  };
  // The keys may use the local provider too: the hop rounds below compare the two on one process.
  const database = await scratchDatabase(kind, 1000, '["jimeng","local"]');
  const gateway = await startProcess(gatewayCommand(), upstreamEnv(database.url, fake.url, database.env));
  const gatewayOptions = { body: UPSTREAM_BODY, connections: UPSTREAM_CONNECTIONS };
  // --ab: the other build on a database of its own (its migrations may differ), seeded alike.
  const abDatabase = AB ? await scratchDatabase(kind, 1000, '["jimeng","local"]', AB) : undefined;
  const abEnv = { ...abDatabase?.env, ...JSON.parse(process.env.BENCH_AB_ENV ?? '{}') };
  const other = abDatabase ? await startProcess([...AB_NODE_FLAGS, AB], upstreamEnv(abDatabase.url, fake.url, abEnv)) : undefined;
  if (other) await load(other.url, abDatabase.keys, { ...gatewayOptions, connections: 10, seconds: 3 });
  // Warm-up: JIT, caches, connection pools.
  await load(gateway.url, database.keys, { ...gatewayOptions, connections: 10, seconds: 3 });
  await load(proxy.url, [], { ...gatewayOptions, connections: 10, seconds: 3 });
  if (portkey) await load(portkey.url, ['bench-ark-key'], { ...portkeyOptions, connections: 10, seconds: 3 });
  const pairs = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const pair = {
      baseMax: await load(proxy.url, [], { ...gatewayOptions, pid: proxy.child.pid }),
      max: await load(gateway.url, database.keys, { ...gatewayOptions, pid: gateway.child.pid }),
      portkeyMax: portkey ? await load(portkey.url, ['bench-ark-key'], { ...portkeyOptions, pid: portkey.child.pid }) : undefined,
      basePaced: await paced(proxy.url, [], UPSTREAM_RATE, SECONDS, { body: UPSTREAM_BODY, pid: proxy.child.pid }),
      paced: await paced(gateway.url, database.keys, UPSTREAM_RATE, SECONDS, { body: UPSTREAM_BODY, pid: gateway.child.pid }),
      ...(other
        ? {
            abMax: await load(other.url, abDatabase.keys, { ...gatewayOptions, pid: other.child.pid }),
            abPaced: await paced(other.url, abDatabase.keys, UPSTREAM_RATE, SECONDS, { body: UPSTREAM_BODY, pid: other.child.pid }),
          }
        : {}),
    };
    pairs.push(pair);
    console.log(name, `round ${round + 1}`, JSON.stringify(pair));
  }
  const rss = rssMb(gateway.child.pid);
  const abRss = other ? rssMb(other.child.pid) : undefined;
  // RSS once idle: V8 keeps the old-space pages it grew under load until its memory reducer runs (seconds
  // after the allocation rate drops), so "after load" and "idle after load" differ by tens of MB.
  await new Promise((resolve) => setTimeout(resolve, IDLE_AFTER_LOAD_MS));
  const rssIdle = rssMb(gateway.child.pid);
  const abRssIdle = other ? rssMb(other.child.pid) : undefined;
  // The hop itself: the same process, keys, connections and path, once with the local provider (tiny PNG, no
  // upstream) and once through the channel to the fake, in alternating rounds; the CPU difference per request is
  // what the hop costs (channel lease and limits, the upstream request and its answer's parse, less the local render).
  const hopRounds = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const local = await load(gateway.url, database.keys, { body: BODY, connections: UPSTREAM_CONNECTIONS, pid: gateway.child.pid });
    const upstream = await load(gateway.url, database.keys, { ...gatewayOptions, pid: gateway.child.pid });
    hopRounds.push({ local: local.cpuUs, upstream: upstream.cpuUs, hop: upstream.cpuUs - local.cpuUs, bad: local.bad + upstream.bad });
  }
  console.log(name, 'hop rounds', JSON.stringify(hopRounds));
  await stop(gateway.child);
  for (const p of [fake, proxy, portkey, other]) if (p) await stop(p.child);
  await database.drop();
  await abDatabase?.drop();
  const m = (pick) => median(pairs.map(pick));
  return {
    date: new Date().toISOString(),
    rps: m((p) => p.max.rps),
    baseRps: m((p) => p.baseMax.rps),
    portkeyRps: portkey ? m((p) => p.portkeyMax.rps) : undefined,
    cpuUs: m((p) => p.max.cpuUs),
    baseCpuUs: m((p) => p.baseMax.cpuUs),
    portkeyCpuUs: portkey ? m((p) => p.portkeyMax.cpuUs) : undefined,
    pacedCpuUs: m((p) => p.paced.cpuUs),
    basePacedCpuUs: m((p) => p.basePaced.cpuUs),
    p99: m((p) => p.max.p99),
    pacedP50: m((p) => p.paced.p50),
    pacedP99: m((p) => p.paced.p99),
    basePacedP99: m((p) => p.basePaced.p99),
    rss,
    rssIdle,
    hop: {
      cpuUs: median(hopRounds.map((h) => h.hop)),
      localCpuUs: median(hopRounds.map((h) => h.local)),
      upstreamCpuUs: median(hopRounds.map((h) => h.upstream)),
      rounds: hopRounds,
    },
    idleAfterLoadMs: IDLE_AFTER_LOAD_MS,
    bad: pairs.reduce((sum, p) => sum + p.max.bad + p.paced.bad, 0),
    rounds: ROUNDS,
    ...(other
      ? {
          ab: {
            build: AB,
            nodeFlags: AB_NODE_FLAGS.join(' '),
            rss: abRss,
            rssIdle: abRssIdle,
            rps: m((p) => p.abMax.rps),
            cpuUs: m((p) => p.abMax.cpuUs),
            pacedP99: m((p) => p.abPaced.p99),
            pacedCpuUs: m((p) => p.abPaced.cpuUs),
          },
        }
      : {}),
  };
}

/** The OpenAI-compatible row: its catalog model, the provider name of the environment account, and the bodies each target takes. */
const COMPAT_PROVIDER = 'compat';
const COMPAT_UPSTREAM_MODEL = 'compat-image-1';
const COMPAT_CATALOG = JSON.stringify({
  models: [{ model: 'compat-image', provider: COMPAT_PROVIDER, upstream_model: COMPAT_UPSTREAM_MODEL, credits_per_image: 1 }],
});
const openAIBody = (model) => JSON.stringify({ prompt: 'a lighthouse at dawn', model, response_format: 'b64_json' });

/**
 * Issue 40's setup: `POST /v1/images/generations` with `response_format: b64_json` to a fake OpenAI-compatible upstream
 * answering at once with the 1x1 PNG (`scripts/bench-fake-ark.cjs`, FAKE_WIRE=openai). Five targets, each measured in
 * every round, the order rotated from round to round: the fake called directly; the bare Express 5 + `fetch` proxy;
 * Portkey's gateway (`x-portkey-provider: openai` + `x-portkey-custom-host`); this gateway on SQLite reaching the fake as
 * an OpenAI-compatible environment account (OPENAI_COMPAT_BASE_URL, provider `compat`: the generic images-api client);
 * and the same gateway process with the `local` provider in `tiny` mode. Each target: SECONDS at 32 connections
 * (req/s, CPU µs/request of its server process from /proc), then SECONDS at a fixed 400 req/s (p50, p99, after 2 s
 * not counted). The hop is the gateway's upstream CPU less its local CPU, per round.
 */
async function measureOpenAICompat() {
  const { fake, proxy, portkey } = await startPeers({ FAKE_WIRE: 'openai' });
  const database = await scratchDatabase('sqlite', 1000, `["${COMPAT_PROVIDER}","local"]`);
  const gateway = await startProcess(
    gatewayCommand(),
    gatewayEnv(database.url, {
      OPENAI_COMPAT_BASE_URL: fake.url,
      OPENAI_COMPAT_API_KEY: 'bench-openai-key',
      OPENAI_COMPAT_PROVIDER_NAME: COMPAT_PROVIDER,
      MODEL_CATALOG: COMPAT_CATALOG,
      // The environment channel's concurrency cap (default 16) above the connections: checked, not the bottleneck.
      [`PROVIDER_${COMPAT_PROVIDER.toUpperCase()}_MAX_CONCURRENCY`]: '64',
    }),
  );
  const v1 = '/v1/images/generations';
  const targets = [
    { name: 'direct', process: fake, keys: [], options: { path: '/images/generations', body: openAIBody(COMPAT_UPSTREAM_MODEL) } },
    { name: 'express', process: proxy, keys: [], options: { path: v1, body: openAIBody(COMPAT_UPSTREAM_MODEL) } },
    ...(portkey
      ? [
          {
            name: 'portkey',
            process: portkey,
            keys: ['bench-openai-key'],
            options: { path: v1, body: openAIBody(COMPAT_UPSTREAM_MODEL), headers: { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': fake.url } },
          },
        ]
      : []),
    { name: 'gateway', process: gateway, keys: database.keys, options: { path: v1, body: openAIBody('compat-image') } },
    { name: 'local', process: gateway, keys: database.keys, options: { path: v1, body: openAIBody('local-1') } },
  ];
  for (const t of targets) await load(t.process.url, t.keys, { ...t.options, connections: 10, seconds: 3 }); // JIT, caches, pools
  const rounds = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const result = {};
    for (let i = 0; i < targets.length; i += 1) {
      const t = targets[(i + round) % targets.length];
      const max = await load(t.process.url, t.keys, { ...t.options, connections: UPSTREAM_CONNECTIONS, pid: t.process.child.pid });
      const atRate = await paced(t.process.url, t.keys, UPSTREAM_RATE, SECONDS, { ...t.options, pid: t.process.child.pid });
      result[t.name] = {
        rps: Math.round(max.rps),
        cpuUs: max.cpuUs,
        bad: max.bad + atRate.bad,
        pacedP50: atRate.p50,
        pacedP99: atRate.p99,
        pacedCpuUs: atRate.cpuUs,
      };
    }
    rounds.push(result);
    console.log('openai-compat', `round ${round + 1}`, JSON.stringify(result));
  }
  const rss = rssMb(gateway.child.pid);
  await stop(gateway.child);
  for (const p of [fake, proxy, portkey]) if (p) await stop(p.child);
  await database.drop();
  const per = (name) => {
    const picks = rounds.map((r) => r[name]);
    const m = (key) => median(picks.map((p) => p[key]));
    return {
      rps: m('rps'),
      cpuUs: m('cpuUs'),
      pacedP50: m('pacedP50'),
      pacedP99: m('pacedP99'),
      pacedCpuUs: m('pacedCpuUs'),
      bad: picks.reduce((sum, p) => sum + p.bad, 0),
    };
  };
  const ratioPerRound = (a, b) => rounds.filter((r) => r[a] && r[b]).map((r) => Math.round((r[a].cpuUs / r[b].cpuUs) * 100) / 100);
  return {
    date: new Date().toISOString(),
    rounds: ROUNDS,
    seconds: SECONDS,
    targets: Object.fromEntries(targets.map((t) => [t.name, per(t.name)])),
    hop: rounds.map((r) => r.gateway.cpuUs - r.local.cpuUs),
    cpuRatio: {
      express: ratioPerRound('gateway', 'express'),
      ...(portkey ? { portkey: ratioPerRound('gateway', 'portkey') } : {}),
    },
    addedP99: {
      overDirect: rounds.map((r) => Number((r.gateway.pacedP99 - r.direct.pacedP99).toFixed(1))),
      overExpress: rounds.map((r) => Number((r.gateway.pacedP99 - r.express.pacedP99).toFixed(1))),
    },
    rss,
  };
}

/** The hop matrix's targets: each route with the local model and with each wire format's model. */
const HOP_ROUTES = { native: '/images/generate', openai: '/v1/images/generations' };
const HOP_MODELS = { local: 'local-1', ark: 'jimeng-4.5', 'openai-compatible': 'compat-image' };

/**
 * The hop of every wire format in one gateway process: it reaches a fake Ark (ARK_BASE_URL) and a fake
 * OpenAI-compatible upstream (OPENAI_COMPAT_BASE_URL, provider `compat`), both answering the 1x1 PNG as b64_json,
 * and serves the local provider (tiny). Every route x model target runs SECONDS at 32 connections in each round, the
 * order rotated; a wire format's hop is its CPU per request less the local model's on the same route, per round.
 */
async function measureHopMatrix() {
  const ark = await startProcess(['scripts/bench-fake-ark.cjs'], {});
  const compat = await startProcess(['scripts/bench-fake-ark.cjs'], { FAKE_WIRE: 'openai' });
  const database = await scratchDatabase('sqlite', 1000, `["jimeng","${COMPAT_PROVIDER}","local"]`);
  const gateway = await startProcess(
    gatewayCommand(),
    upstreamEnv(database.url, ark.url, {
      OPENAI_COMPAT_BASE_URL: compat.url,
      OPENAI_COMPAT_API_KEY: 'bench-openai-key',
      OPENAI_COMPAT_PROVIDER_NAME: COMPAT_PROVIDER,
      MODEL_CATALOG: COMPAT_CATALOG,
      [`PROVIDER_${COMPAT_PROVIDER.toUpperCase()}_MAX_CONCURRENCY`]: '64',
    }),
  );
  const targets = Object.entries(HOP_ROUTES).flatMap(([route, routePath]) =>
    Object.entries(HOP_MODELS).map(([wire, model]) => ({ route, wire, options: { path: routePath, body: openAIBody(model) } })),
  );
  for (const t of targets) await load(gateway.url, database.keys, { ...t.options, connections: 10, seconds: 2 });
  const cpu = Object.fromEntries(targets.map((t) => [`${t.route} ${t.wire}`, []]));
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let i = 0; i < targets.length; i += 1) {
      const t = targets[(i + round) % targets.length];
      const result = await load(gateway.url, database.keys, { ...t.options, connections: UPSTREAM_CONNECTIONS, pid: gateway.child.pid });
      if (result.bad > 0) console.log('hop-matrix', `${t.route} ${t.wire}`, `${result.bad} non-2xx`);
      cpu[`${t.route} ${t.wire}`].push(result.cpuUs);
    }
    console.log('hop-matrix', `round ${round + 1}`, JSON.stringify(cpu));
  }
  await stop(gateway.child);
  for (const p of [ark, compat]) await stop(p.child);
  await database.drop();
  const hops = {};
  for (const route of Object.keys(HOP_ROUTES))
    for (const wire of Object.keys(HOP_MODELS).filter((w) => w !== 'local')) {
      const perRound = cpu[`${route} ${wire}`].map((us, round) => us - cpu[`${route} local`][round]);
      hops[`${route} ${wire}`] = { hop: median(perRound), perRound, cpuUs: median(cpu[`${route} ${wire}`]), localCpuUs: median(cpu[`${route} local`]) };
    }
  return { date: new Date().toISOString(), rounds: ROUNDS, seconds: SECONDS, hops };
}

const gatewayCommand = () => [
  ...GATEWAY_NODE_FLAGS,
  ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
  ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${root}/bench-profiles`] : []),
  'dist/src/main.js',
];

function openFiles(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

async function scrape(internalUrl) {
  const response = await fetch(`${internalUrl}/metrics`);
  return response.text();
}

/**
 * The kernel's TCP counters that tell why a client saw a reset (this network namespace, all processes):
 * accept-queue overflows and drops, SYN cookies sent and failed, aborts on close with unread data, resets sent.
 */
function tcpCounters() {
  const names = [
    'ListenOverflows',
    'ListenDrops',
    'SyncookiesSent',
    'SyncookiesFailed',
    'TCPAbortOnData',
    'TCPAbortOnClose',
    'TCPAbortOnTimeout',
    'EstabResets',
    'OutRsts',
    'AttemptFails',
  ];
  const counters = {};
  for (const file of ['/proc/net/netstat', '/proc/net/snmp']) {
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const keys = lines[i].split(/\s+/).slice(1);
      const values = lines[i + 1].split(/\s+/).slice(1);
      keys.forEach((key, j) => {
        if (names.includes(key)) counters[key] = Number(values[j]);
      });
    }
  }
  return counters;
}

function metricValue(text, name) {
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
}

/**
 * Slow generations: INFLIGHT requests held at once by a fake upstream that answers after DELAY ms. Memory per
 * request in flight (RSS at the peak less RSS before, over the count), the gateway's event-loop delay p99 meanwhile
 * (its own perf_hooks monitor, through /metrics), open file descriptors, and whether all succeeded.
 */
/** The load of the overload row, as multiples of the capacity measured just before it. */
const OVERLOAD_LOADS = [0.7, 2];
/** Connections of the closed loop that measures capacity: enough that PostgreSQL's round trips do not bound it below the CPU's. */
const OVERLOAD_CAPACITY_CONNECTIONS = 200;
/** Clients of the overload row at most at once (sockets): each waits for its answer before its next request. */
const OVERLOAD_CLIENTS = 4000;

/**
 * Issue 40 §3: above capacity, is a request refused at once (503 `overloaded` + Retry-After) or does it wait to
 * fail? The local provider (tiny), 1,000 keys, the default SHED_* settings. Capacity is the closed-loop
 * req/s at OVERLOAD_CAPACITY_CONNECTIONS; then an open loop at each of OVERLOAD_LOADS x capacity for SECONDS over up to
 * OVERLOAD_CLIENTS sockets, every answer counted by status with its latency from when it was due.
 */
async function measureOverload(kind) {
  const database = await scratchDatabase(kind, 1000, '["local"]');
  const gateway = await startProcess(gatewayCommand(), gatewayEnv(database.url, database.env), { nofile: 20_000 });
  const refusals = async () => metricValue(await scrape(gateway.internalUrl), 'creative_gateway_overload_refusals_total') ?? 0;
  await load(gateway.url, database.keys, { connections: 10, seconds: 3 });
  const capacity = await load(gateway.url, database.keys, { connections: OVERLOAD_CAPACITY_CONNECTIONS, pid: gateway.child.pid });
  const phases = [];
  for (const multiple of OVERLOAD_LOADS) {
    const rate = Math.round(capacity.rps * multiple);
    // A scrape resets the gateway's event-loop delay histogram: the one after the phase reads the phase's.
    const refusedBefore = await refusals();
    const result = await pacedOnce(gateway.url, database.keys, rate, SECONDS, { maxSockets: OVERLOAD_CLIENTS, errorCodes: true });
    const metrics = await scrape(gateway.internalUrl);
    const loopMs = (name) => Number(((metricValue(metrics, name) ?? NaN) * 1000).toFixed(1));
    phases.push({
      multiple,
      rate,
      total: result.total,
      seconds: Number(result.seconds.toFixed(1)),
      statuses: result.statuses,
      shed: (metricValue(metrics, 'creative_gateway_overload_refusals_total') ?? 0) - refusedBefore,
      eventLoopP99Ms: loopMs('creative_gateway_nodejs_eventloop_lag_p99_seconds'),
      eventLoopMaxMs: loopMs('creative_gateway_nodejs_eventloop_lag_max_seconds'),
    });
    console.log(`overload ${kind}`, JSON.stringify(phases.at(-1)));
    // Let the backlog drain before the next phase.
    await new Promise((resolve) => setTimeout(resolve, 3000));
  }
  await stop(gateway.child);
  await database.drop();
  return { date: new Date().toISOString(), kind, seconds: SECONDS, capacity: Math.round(capacity.rps), phases };
}

/** Requests the slow row's client may have sent that the gateway has not yet admitted (half the listen backlog). */
const SLOW_WINDOW = 2000;
/** The slow row's client opens RAMP_STEP connections every RAMP_STEP / 2 ms (at most 2,000 a second). */
const RAMP_STEP = Number(flag('ramp-step') ?? 100);

/**
 * Holds N slow requests in flight at once in one server process. `target` 'gateway' is this gateway on SQLite;
 * 'express' is the bare Express 5 + `fetch` proxy (scripts/bench-proxy-baseline.cjs) holding the same requests against
 * the same fake upstream: the floor Node's HTTP server and undici set per held request, measured in the same run.
 */
async function measureSlow(requested, delayMs, target = 'gateway') {
  // 'gateway-async': the same generations sent with `Prefer: respond-async`: answered 202 at once, run by the
  // background worker (GENERATION_WORKER_CONCURRENCY raised to hold them all), so only the upstream call is held.
  const asynchronous = target === 'gateway-async';
  // Each request in flight holds two sockets in the gateway (client and upstream): the open-files limit
  // must exceed 2 x N plus the gateway's own (~100). Raised as far as the hard limit allows.
  const hardLimit = Number(/^Max open files\s+\d+\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? Infinity);
  const nofile = Math.min(requested * 2 + 1000, hardLimit);
  const inflight = Math.min(requested, Math.floor((nofile - 400) / 2));
  if (inflight < requested)
    console.log(`slow: ${requested} in flight need ~${requested * 2 + 400} open files in the gateway; the hard limit here is ${hardLimit}, so ${inflight}`);
  const fake = await startProcess(['scripts/bench-fake-ark.cjs'], { FAKE_DELAY_MS: String(delayMs) }, { nofile });
  const database = await scratchDatabase('sqlite', 1000, '["jimeng"]');
  const gateway =
    target === 'express'
      ? await startProcess(['scripts/bench-proxy-baseline.cjs'], { UPSTREAM_URL: fake.url }, { nofile })
      : await startProcess(
          gatewayCommand(),
          upstreamEnv(database.url, fake.url, {
            CHANNEL_QUEUE_TIMEOUT_MS: '60000',
            PROVIDER_TIMEOUT_MS: String(delayMs + 60_000),
            PROVIDER_JIMENG_MAX_CONCURRENCY: '10000',
            UPSTREAM_CONNECT_TIMEOUT_MS: '10000',
            ...(asynchronous ? { GENERATION_WORKER_CONCURRENCY: '10000' } : {}),
            // BENCH_SLOW_ENV (JSON): extra environment for the gateway of the slow rows (allocator settings, say).
            ...JSON.parse(process.env.BENCH_SLOW_ENV ?? '{}'),
          }),
          { nofile },
        );
  const limits = fs.readFileSync(`/proc/${gateway.child.pid}/limits`, 'utf8');
  const nofileLimit = Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1]);
  await load(gateway.url, database.keys, { body: UPSTREAM_BODY, connections: 10, seconds: 3 });
  const rssBefore = rssMb(gateway.child.pid);
  const fdsBefore = openFiles(gateway.child.pid);
  // Also resets the event-loop delay histogram.
  const metricsBefore = gateway.internalUrl ? await scrape(gateway.internalUrl) : '';
  const heapUsedBeforeMb = Math.round((metricValue(metricsBefore, 'creative_gateway_nodejs_heap_size_used_bytes') ?? NaN) / 2 ** 20);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const tcpBefore = tcpCounters();
  const callsBefore = (await (await fetch(`${fake.url}/stats`)).json()).calls;
  const failedAfterMs = [];
  let ok = 0;
  let failed = 0;
  const statuses = {};
  const started = performance.now();
  let peakRss = rssBefore;
  let peakFds = fdsBefore;
  let snapshotTaken = !process.env.BENCH_HEAP_SNAPSHOT;
  // Longest accept queue seen on each listener (ss's Recv-Q of a LISTEN socket): a full queue drops handshakes.
  const ports = { gateway: new URL(gateway.url).port, upstream: new URL(fake.url).port };
  const acceptQueue = { gateway: 0, upstream: 0, backlog: 0 };
  const sampleAcceptQueues = () => {
    try {
      for (const line of execFileSync('ss', ['-ltnH'], { encoding: 'utf8' }).split('\n')) {
        const [, recvQ, sendQ, local] = line.trim().split(/\s+/);
        for (const [name, port] of Object.entries(ports)) {
          if (local?.endsWith(`:${port}`)) {
            acceptQueue[name] = Math.max(acceptQueue[name], Number(recvQ));
            if (name === 'gateway') acceptQueue.backlog = Number(sendQ);
          }
        }
      }
    } catch {
      // no ss here: the row says 0
    }
  };
  const sample = setInterval(() => {
    peakRss = Math.max(peakRss, rssMb(gateway.child.pid));
    peakFds = Math.max(peakFds, openFiles(gateway.child.pid));
    sampleAcceptQueues();
    // BENCH_HEAP_SNAPSHOT=1 (with BENCH_NODE_FLAGS=--heapsnapshot-signal=SIGUSR2): one snapshot once most are held.
    if (!snapshotTaken && peakFds - fdsBefore >= inflight * 1.8) {
      snapshotTaken = true;
      gateway.child.kill('SIGUSR2');
    }
  }, 250);
  let allSentAt;
  const queued = []; // [generation id, key] of the asynchronous ones
  const done = new Promise((resolve) => {
    let finished = 0;
    const finish = (status, sentAt) => {
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status !== 200) failedAfterMs.push(Math.round(performance.now() - sentAt));
      if (status === 200) ok += 1;
      else failed += 1;
      if (++finished === inflight) resolve();
    };
    let sent = 0;
    // Connections are opened in steps of 100 every 50 ms, but never more than WINDOW ahead of the gateway: a
    // request counts as admitted once it has reached the fake upstream (or been answered). Opening them
    // faster than the gateway admits them only fills the kernel's accept queue (net.core.somaxconn, 4,096):
    // the kernel then drops the handshakes it cannot queue and those clients get ECONNRESET, seconds later
    // (the 2026-11-23/24 runs: 1,295-1,979 of 9,800, with ListenOverflows in the tens of thousands and the
    // gateway's accept queue at 4,096). The ramp is as fast as the gateway admits on the machine.
    const step = async () => {
      let admitted = 0;
      try {
        admitted = (await (await fetch(`${fake.url}/stats`)).json()).calls - callsBefore;
      } catch {
        // the fake did not answer this time: nothing new is sent in this step
      }
      // Failed ones never reached the fake; answered ones are in its count already.
      const allowed = Math.min(inflight, Math.max(admitted, 0) + failed + SLOW_WINDOW);
      for (let j = 0; j < RAMP_STEP && sent < allowed; j += 1, sent += 1) {
        const key = database.keys[sent % database.keys.length];
        const sentAt = performance.now();
        const request = http.request(`${gateway.url}/images/generate`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...(asynchronous ? { prefer: 'respond-async' } : {}) },
        });
        request.on('response', (response) => {
          let text = '';
          if (asynchronous) response.on('data', (chunk) => (text += chunk));
          else response.resume();
          response.on('end', () => {
            if (!asynchronous) return finish(response.statusCode, sentAt);
            if (response.statusCode === 202) queued.push([JSON.parse(text).id, key]);
            finish(response.statusCode === 202 ? 200 : response.statusCode, sentAt);
          });
        });
        request.on('error', (error) => finish(error.code ?? 'error', sentAt));
        request.end(UPSTREAM_BODY);
      }
      if (sent < inflight) setTimeout(() => void step(), RAMP_STEP / 2);
      else allSentAt = performance.now();
    };
    void step();
    step();
  });
  // Bounded: whatever has not been answered by then counts as failed.
  let deadlineTimer;
  await Promise.race([done, new Promise((resolve) => (deadlineTimer = setTimeout(resolve, delayMs + inflight * 20 + 60_000)))]);
  clearTimeout(deadlineTimer);
  if (asynchronous) {
    // Accepted is not done: wait for the upstream to have answered every call and the worker to settle
    // them, then count the generations by their final status.
    const until = performance.now() + delayMs + 120_000;
    for (;;) {
      const stats = await (await fetch(`${fake.url}/stats`)).json();
      if ((stats.calls - callsBefore >= queued.length && stats.inFlight === 0) || performance.now() > until) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    ok = 0;
    for (const status of Object.keys(statuses)) delete statuses[status];
    for (let i = 0; i < queued.length; i += 100) {
      const finals = await Promise.all(
        queued.slice(i, i + 100).map(async ([id, key]) => {
          for (let tries = 0; ; tries += 1) {
            const body = await (await fetch(`${gateway.url}/generations/${id}`, { headers: { authorization: `Bearer ${key}` } })).json();
            if (!['queued', 'running'].includes(body.status) || tries === 20) return body.status ?? body.error?.code;
            await new Promise((resolve) => setTimeout(resolve, 500));
          }
        }),
      );
      for (const status of finals) statuses[status] = (statuses[status] ?? 0) + 1;
    }
    ok = statuses.succeeded ?? 0;
    failed = inflight - ok;
  }
  const unanswered = asynchronous ? 0 : inflight - ok - failed;
  if (unanswered > 0) statuses.unanswered = unanswered;
  failed += unanswered;
  clearInterval(sample);
  const seconds = (performance.now() - started) / 1000;
  const tcpAfter = tcpCounters();
  const tcp = Object.fromEntries(Object.keys(tcpAfter).map((key) => [key, tcpAfter[key] - (tcpBefore[key] ?? 0)]));
  const metrics = gateway.internalUrl ? await scrape(gateway.internalUrl) : '';
  const fakeStats = await (await fetch(`${fake.url}/stats`)).json();
  // Issue 40 target 4: RSS back to at most 1.5x its idle value (rssBefore) within 30 s of the last answer.
  // Sampled each second; the row gives the RSS at 30 s and when it first came down to 1.5x.
  const answeredAt = performance.now();
  let rssReturnSeconds;
  let rssAfterIdle = rssMb(gateway.child.pid);
  while (performance.now() - answeredAt < IDLE_AFTER_LOAD_MS) {
    rssAfterIdle = rssMb(gateway.child.pid);
    if (rssReturnSeconds === undefined && rssAfterIdle <= rssBefore * 1.5) rssReturnSeconds = Number(((performance.now() - answeredAt) / 1000).toFixed(1));
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  rssAfterIdle = rssMb(gateway.child.pid);
  // What the RSS left after the load is made of: V8's heap (committed, and live) and memory outside it.
  const idleMetrics = gateway.internalUrl ? await scrape(gateway.internalUrl) : '';
  const mb = (name) => {
    const bytes = metricValue(idleMetrics, name);
    return bytes === undefined ? undefined : Math.round(bytes / 2 ** 20);
  };
  const heapAfterIdle = {
    totalMb: mb('creative_gateway_nodejs_heap_size_total_bytes'),
    usedMb: mb('creative_gateway_nodejs_heap_size_used_bytes'),
    externalMb: mb('creative_gateway_nodejs_external_memory_bytes'),
  };
  await stop(gateway.child);
  await stop(fake.child);
  await database.drop();
  agent.destroy();
  return {
    date: new Date().toISOString(),
    target,
    requested,
    connectTimeoutMs: 10_000,
    inflight,
    delayMs,
    ok,
    failed,
    statuses,
    seconds: Number(seconds.toFixed(1)),
    maxInFlightAtUpstream: fakeStats.maxInFlight,
    rssBefore,
    peakRss,
    // Per request held at once: the asynchronous ones never all reach the upstream together (the first answer
    // before the last is picked up), so divide by those that were.
    kbPerRequest: Math.round(((peakRss - rssBefore) * 1024) / Math.min(inflight, fakeStats.maxInFlight)),
    rssAfterIdle,
    rssReturnSeconds,
    heapUsedBeforeMb,
    heapAfterIdle,
    eventLoopP99Ms: Number(((metricValue(metrics, 'creative_gateway_nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000).toFixed(1)),
    eventLoopMaxMs: Number(((metricValue(metrics, 'creative_gateway_nodejs_eventloop_lag_max_seconds') ?? NaN) * 1000).toFixed(1)),
    fdsBefore,
    peakFds,
    nofileLimit,
    // How long the client took to send them all (paced by the gateway's admission, see SLOW_WINDOW).
    rampSeconds: allSentAt ? Number(((allSentAt - started) / 1000).toFixed(1)) : undefined,
    tcp,
    acceptQueue,
    // When the failures came, ms after their request was sent: min, median, max.
    failedAfterMs: failedAfterMs.length
      ? [Math.min(...failedAfterMs), failedAfterMs.sort((a, b) => a - b)[failedAfterMs.length >> 1], Math.max(...failedAfterMs)]
      : [],
  };
}

/**
 * Slow generations on 3 replicas sharing PostgreSQL + Redis, with limits that bind: KEYS keys with max_concurrent
 * PER_KEY_CAP each, PER_KEY requests per key spread over the replicas, and one database channel (shared limits)
 * whose max_concurrency is below what the keys admit. Exact means: exactly KEYS x (PER_KEY - PER_KEY_CAP) requests
 * refused as concurrency_limited, the fake upstream never sees more than the channel's cap at once (and reaches it),
 * exactly KEYS x PER_KEY_CAP upstream calls,
 * and every admitted request succeeds (those over the channel cap wait in its queue for the first wave to end).
 */
async function measureSlowReplicas({ keyCount = 1250, perKey = 10, perKeyCap = 8, channelCap = 8000, delayMs = 30_000, rate = 500 } = {}) {
  const total = keyCount * perKey;
  const admitted = keyCount * perKeyCap;
  const nofile = 20_000;
  const fake = await startProcess(['scripts/bench-fake-ark.cjs'], { FAKE_DELAY_MS: String(delayMs) }, { nofile });
  const database = await scratchDatabase('postgres', keyCount, '["jimeng"]');
  {
    const { Client } = require('pg');
    const client = new Client({ connectionString: database.url });
    await client.connect();
    await client.query('UPDATE api_keys SET max_concurrent = $1', [perKeyCap]);
    await client.end();
  }
  const env = gatewayEnv(database.url, {
    ...database.env,
    // No ARK_API_KEY: the only channel is the database one below, whose limits are shared through Redis.
    // Those over the channel's cap wait for the first wave to end (the longest wait allowed is 60 s).
    CHANNEL_QUEUE_TIMEOUT_MS: '60000',
    CHANNEL_QUEUE_MAX_WAITERS: '10000',
    PROVIDER_TIMEOUT_MS: String(2 * delayMs + 60_000),
    UPSTREAM_CONNECT_TIMEOUT_MS: '10000',
    DB_CONNECT_TIMEOUT_MS: '15000',
    REDIS_COMMAND_TIMEOUT_MS: '10000',
  });
  const replicas = [];
  for (let i = 0; i < 3; i += 1) replicas.push(await startProcess(gatewayCommand(), env, { nofile }));
  const created = await fetch(`${replicas[0].url}/admin/channels`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_SECRET}` },
    body: JSON.stringify({
      name: 'bench fake ark',
      provider: 'jimeng',
      transport: 'ark',
      base_url: fake.url,
      models: [{ model: 'jimeng-4.5' }],
      credentials: { api_key: 'bench-ark-key' },
      max_concurrency: channelCap,
      timeout_ms: 2 * delayMs + 60_000,
    }),
  });
  if (created.status !== 201) throw new Error(`slow-pg: creating the channel answered ${created.status} ${await created.text()}`);
  await new Promise((resolve) => setTimeout(resolve, 1500)); // replicas re-read the channel list every second
  const rssBefore = replicas.map((r) => rssMb(r.child.pid));
  for (const r of replicas) await scrape(r.internalUrl); // resets the event-loop delay histograms
  const peakRss = [...rssBefore];
  const sample = setInterval(() => replicas.forEach((r, i) => (peakRss[i] = Math.max(peakRss[i], rssMb(r.child.pid)))), 250);
  const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
  const statuses = {};
  const codes = {};
  const started = performance.now();
  await new Promise((resolve) => {
    let finished = 0;
    const finish = (status, code) => {
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (code) codes[code] = (codes[code] ?? 0) + 1;
      if (++finished === total) resolve();
    };
    let sent = 0;
    // Evenly paced; a key's requests are sent one after the other (to the three replicas in turn), so they are all
    // in flight at once whatever the length of the whole ramp.
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000) + 1);
      for (; sent < due; sent += 1) {
        const key = database.keys[Math.floor(sent / perKey)];
        const request = http.request(`${replicas[sent % 3].url}/images/generate`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        });
        request.on('response', (response) => {
          const chunks = [];
          response.on('data', (chunk) => chunks.push(chunk));
          response.on('end', () => {
            let code;
            if (response.statusCode !== 200) {
              try {
                code = JSON.parse(Buffer.concat(chunks).toString()).error?.code;
              } catch {
                code = 'unparsable';
              }
            }
            finish(response.statusCode, code);
          });
        });
        request.on('error', (error) => finish(error.code ?? 'error', undefined));
        request.end(UPSTREAM_BODY);
      }
      if (sent < total) setTimeout(tick, 10);
    };
    tick();
  });
  clearInterval(sample);
  const seconds = (performance.now() - started) / 1000;
  const metrics = await Promise.all(replicas.map((r) => scrape(r.internalUrl)));
  const fakeStats = await (await fetch(`${fake.url}/stats`)).json();
  for (const r of replicas) await stop(r.child);
  await stop(fake.child);
  await database.drop();
  agent.destroy();
  const ok = statuses[200] ?? 0;
  const refused = codes.concurrency_limited ?? 0;
  return {
    date: new Date().toISOString(),
    replicas: 3,
    keys: keyCount,
    perKey,
    perKeyCap,
    channelCap,
    delayMs,
    rate,
    total,
    ok,
    refused,
    statuses,
    codes,
    expectedOk: admitted,
    expectedRefused: total - admitted,
    exact: ok === admitted && refused === total - admitted && fakeStats.maxInFlight === channelCap && fakeStats.calls === admitted,
    maxInFlightAtUpstream: fakeStats.maxInFlight,
    upstreamCalls: fakeStats.calls,
    seconds: Number(seconds.toFixed(1)),
    rssBefore,
    peakRss,
    // Each replica held about a third of the admitted requests (those at the upstream and those queued for the channel).
    kbPerRequest: Math.round(((peakRss.reduce((a, b) => a + b, 0) - rssBefore.reduce((a, b) => a + b, 0)) * 1024) / admitted),
    eventLoopP99Ms: metrics.map((text) => Number(((metricValue(text, 'creative_gateway_nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000).toFixed(1))),
  };
}

const RESULTS = path.join(root, 'bench-results', 'latest.json');

async function main() {
  const results = fs.existsSync(RESULTS) ? JSON.parse(fs.readFileSync(RESULTS, 'utf8')) : {};
  const save = () => {
    fs.mkdirSync(path.dirname(RESULTS), { recursive: true });
    fs.writeFileSync(RESULTS, JSON.stringify(results, null, 2));
  };
  results.machine = `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}, Node ${process.version}`;
  if (ONLY.has('upstream')) {
    results.upstream = await measureUpstream('upstream sqlite', 'sqlite');
    if (results.upstream.ab)
      console.log(
        'A/B',
        JSON.stringify({ this: { rps: results.upstream.rps, cpuUs: results.upstream.cpuUs, pacedP99: results.upstream.pacedP99 }, other: results.upstream.ab }),
      );
    save();
  }
  if (ONLY.has('upstream-pg')) {
    results.upstreamPg = await measureUpstream('upstream postgres+redis', 'postgres');
    save();
  }
  if (ONLY.has('openai-compat')) {
    results.openaiCompat = await measureOpenAICompat();
    console.log('openai-compat', JSON.stringify(results.openaiCompat));
    save();
  }
  if (ONLY.has('hop-matrix')) {
    results.hopMatrix = await measureHopMatrix();
    save();
  }
  if (ONLY.has('overload')) {
    results.overload = [await measureOverload('sqlite'), ...(process.env.BENCH_SKIP_PG ? [] : [await measureOverload('postgres')])];
    save();
  }
  if (ONLY.has('slow')) {
    // --slow-targets gateway,gateway-async,express (all three unless given): which servers hold the requests.
    const targets = (flag('slow-targets') ?? 'gateway,gateway-async,express').split(',');
    const hold = async (target, name) => {
      if (!targets.includes(target)) return;
      results[name] = await measureSlow(Number(flag('inflight') ?? 10_000), Number(flag('delay') ?? 30_000), target);
      console.log(name, JSON.stringify(results[name]));
    };
    await hold('gateway', 'slow');
    await hold('gateway-async', 'slowAsync');
    await hold('express', 'slowBaseline');
    save();
  }
  if (ONLY.has('slow-pg')) {
    // --delay MS: the fake upstream's answer delay here too (a slower machine needs longer to bring the first wave in).
    results.slowPg = await measureSlowReplicas(flag('delay') ? { delayMs: Number(flag('delay')) } : {});
    console.log('slow-pg', JSON.stringify(results.slowPg));
    save();
  }
  if (ONLY.has('analytics')) {
    const analytics = await measureAnalytics(
      {
        keys: Number(flag('analytics-keys') ?? 100_000),
        generations: Number(flag('analytics-generations') ?? 10_000_000),
        days: Number(flag('analytics-days') ?? 90),
        rounds: Number(flag('rounds') ?? 9),
      },
      { startProcess, stop, gatewayEnv, scratchDatabase, median, adminSecret: ADMIN_SECRET },
    );
    results.analytics = analytics;
    save();
  }
  if (ONLY.has('guardrails')) {
    // One prompt-rule check of the largest accepted sets against the longest prompts (docs/guardrails.md, "What a check costs").
    results.guardrails = JSON.parse(execFileSync(process.execPath, ['scripts/bench-guardrails.mjs', '--json'], { cwd: root, encoding: 'utf8' }));
    console.table(results.guardrails);
    save();
  }
  if (ONLY.has('sqlite10k') || ONLY.has('sqlite1m') || ONLY.has('postgres')) {
    // Baseline: bare Express 5 answering the same JSON body; it runs beside every local-provider setup.
    const baseline = await startProcess(['scripts/bench-baseline.cjs'], {});
    await load(baseline.url, [], { connections: 10 });
    results.baselineRss = rssMb(baseline.child.pid);
    if (ONLY.has('sqlite10k') || ONLY.has('sqlite1m')) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-bench-'));
      const file = path.join(dir, 'gateway.db');
      {
        // Let the gateway create the schema, then seed.
        const { child } = await startProcess(['dist/src/main.js'], gatewayEnv(file));
        await stop(child);
      }
      const keys = seedSqlite(file, 10_000, 10_000);
      if (ONLY.has('sqlite10k')) {
        // --ab: the other build makes its own schema (its migrations), then gets the same 10k keys' worth of rows.
        const abFile = path.join(dir, 'ab.db');
        if (AB) await stop((await startProcess([AB], gatewayEnv(abFile))).child);
        const ab = AB ? { env: gatewayEnv(abFile, JSON.parse(process.env.BENCH_AB_ENV ?? '{}')), keys: seedSqlite(abFile, 10_000, 10_000) } : undefined;
        results.sqlite10k = {
          rounds: ROUNDS,
          seconds: SECONDS,
          date: new Date().toISOString(),
          ...(await measureAgainstBaseline('sqlite 10k keys', baseline, gatewayEnv(file), keys, ab)),
        };
        if (results.sqlite10k.ab)
          console.log('A/B sqlite10k', JSON.stringify({ this: { rps: results.sqlite10k.rps, cpuUs: results.sqlite10k.cpuUs }, other: results.sqlite10k.ab }));
        save();
      }
      if (ONLY.has('sqlite1m')) {
        seedSqlite(file, 990_000, 0);
        results.sqlite1m = {
          rounds: ROUNDS,
          seconds: SECONDS,
          date: new Date().toISOString(),
          ...(await measureAgainstBaseline('sqlite 1M keys', baseline, gatewayEnv(file), keys)),
        };
        save();
      }
      fs.rmSync(dir, { recursive: true, force: true });
    }
    if (ONLY.has('postgres')) {
      const database = await scratchDatabase('postgres', 10_000, '["local"]');
      results.postgres = {
        rounds: ROUNDS,
        seconds: SECONDS,
        date: new Date().toISOString(),
        ...(await measureAgainstBaseline('postgres+redis 10k keys', baseline, gatewayEnv(database.url, database.env), database.keys)),
      };
      await database.drop();
      save();
    }
    await stop(baseline.child);
  }
  writeReport(results);
  console.log(`wrote ${RESULTS} and ${path.join(root, 'BENCHMARKS.md')}`);
}

function writeReport(r) {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  const pct = (x, of) => `${((x / of) * 100).toFixed(0)}%`;
  const rows = [
    ['gateway, SQLite, 10,000 keys', r.sqlite10k],
    ['gateway, SQLite, 1,000,000 keys', r.sqlite1m],
    ['gateway, PostgreSQL + Redis, 10,000 keys', r.postgres],
  ].filter(([, v]) => v);
  const throughput = rows
    .map(
      ([name, v]) =>
        `| ${name} (${v.date.slice(0, 10)}) | ${Math.round(v.rps)} | ${Math.round(v.baseRps)} | **${pct(v.rps, v.baseRps)}** | ${v.cpuUs} | ${v.baseCpuUs} | ${pct(v.baseCpuUs, v.cpuUs)} | ${v.p50} | ${v.p99} | ${v.rss} | ${v.bad} |`,
    )
    .join('\n');
  const upstreamRows = [
    ['gateway on SQLite, 1,000 keys', r.upstream],
    ['gateway on PostgreSQL + Redis, 1,000 keys', r.upstreamPg],
  ].filter(([, v]) => v);
  const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}×` : 'n/a');
  const upstreamThroughput = upstreamRows
    .map(
      ([name, v]) =>
        `| ${name} | ${Math.round(v.rps)} | ${Math.round(v.baseRps)} | **${ratio(v.rps, v.baseRps)}** | ${v.portkeyRps ? Math.round(v.portkeyRps) : 'n/a'} | **${ratio(v.rps, v.portkeyRps)}** | ${v.cpuUs} | ${v.baseCpuUs} | ${v.portkeyCpuUs ?? 'n/a'} | ${v.rss}${v.rssIdle ? ` (${v.rssIdle} after ${v.idleAfterLoadMs / 1000} s idle)` : ''} | ${v.bad} | ${v.date.slice(0, 16)}, ${v.rounds} rounds |`,
    )
    .join('\n');
  const hopLines = upstreamRows
    .filter(([, v]) => v.hop)
    .map(
      ([name, v]) =>
        `- ${name}: **${v.hop.cpuUs} µs** of CPU per request for the hop (median of the per-round differences ${v.hop.rounds.map((h) => h.hop).join(', ')}; upstream ${v.hop.upstreamCpuUs} µs, local provider ${v.hop.localCpuUs} µs, same process, ${UPSTREAM_CONNECTIONS} connections)`,
    )
    .join('\n');
  const upstreamLatency = upstreamRows
    .map(
      ([name, v]) =>
        `| ${name} | ${v.pacedP50} | ${v.pacedP99} | ${v.basePacedP99} | **${(v.pacedP99 - v.basePacedP99).toFixed(1)}** | ${v.pacedCpuUs} | ${v.basePacedCpuUs} |`,
    )
    .join('\n');
  const oc = r.openaiCompat;
  const ocNames = {
    direct: 'upstream called directly',
    express: 'bare Express 5 + `fetch` proxy',
    portkey: "Portkey's gateway",
    gateway: '**this gateway -> upstream**',
    local: 'this gateway, `local` provider',
  };
  const openaiCompat = oc
    ? Object.entries(oc.targets)
        .map(
          ([name, t]) =>
            `| ${ocNames[name]} | ${Math.round(t.rps)} | ${t.cpuUs} | ${name === 'gateway' ? '1' : (oc.targets.gateway.cpuUs / t.cpuUs).toFixed(2)} | ${t.pacedP50} | ${t.pacedP99} | ${(t.pacedP99 - oc.targets.direct.pacedP99).toFixed(1)} | ${t.pacedCpuUs} | ${t.bad} |`,
        )
        .join('\n') +
      `\n\nThe hop (this gateway's upstream CPU less its local CPU, same process, same round): **${median(oc.hop)} µs** (per round ${oc.hop.join(', ')}). ` +
      `Gateway CPU / Express+fetch per round ${oc.cpuRatio.express.join(', ')}${oc.cpuRatio.portkey ? `; / Portkey per round ${oc.cpuRatio.portkey.join(', ')}` : ''}. ` +
      `Gateway p99 at ${UPSTREAM_RATE}/s over Express+fetch's per round ${oc.addedP99.overExpress.join(', ')} ms. Gateway RSS after the rounds ${oc.rss} MB. Measured ${oc.date.slice(0, 16)}, ${oc.rounds} rounds of ${oc.seconds} s.`
    : '| not measured | | | | | | | | |';
  // The rounds and seconds of the baseline rows' last measurement (a run of other rows leaves them as they were).
  const baselineRow = [r.sqlite10k, r.sqlite1m, r.postgres].filter(Boolean).sort((a, b) => (b.date ?? '').localeCompare(a.date ?? ''))[0];
  const baselineRuns = { rounds: baselineRow?.rounds ?? ROUNDS, seconds: baselineRow?.seconds ?? SECONDS };
  const hm = r.hopMatrix;
  const hopMatrix = hm
    ? Object.entries(hm.hops)
        .map(
          ([name, h]) =>
            `| ${name.replace(' ', ' route, ')} | ${h.cpuUs} | ${h.localCpuUs} | **${h.hop}** (${h.perRound.join(', ')}) | ${hm.date.slice(0, 16)}, ${hm.rounds} rounds of ${hm.seconds} s |`,
        )
        .join('\n')
    : '| not measured | | | | |';
  const fmtStatuses = (statuses) =>
    Object.entries(statuses)
      .map(
        ([status, v]) =>
          `${v.count.toLocaleString('en')} × ${status} (p50 ${v.p50}, p99 ${v.p99}, max ${v.max}${v.servedP50 === undefined ? '' : `; answered in p50 ${v.servedP50}, p99 ${v.servedP99}`})`,
      )
      .join('; ');
  const overload =
    (r.overload ?? [])
      .flatMap((o) =>
        o.phases.map(
          (p) =>
            `| ${o.kind === 'sqlite' ? 'SQLite' : 'PostgreSQL + Redis'} | ${o.capacity.toLocaleString('en')} | ${p.multiple}× = ${p.rate.toLocaleString('en')} req/s | ${p.total.toLocaleString('en')} in ${p.seconds} s | ${fmtStatuses(p.statuses)} | ${p.shed.toLocaleString('en')} | ${p.eventLoopP99Ms} / ${p.eventLoopMaxMs} | ${o.date.slice(0, 16)} |`,
        ),
      )
      .join('\n') || '| not measured | | | | | | | |';
  const slowRow = (row, server) =>
    `| ${server} | ${row.inflight.toLocaleString('en')} | ${row.delayMs / 1000} s | ${row.ok} ok, ${row.failed} failed ${JSON.stringify(row.statuses)} | ${row.maxInFlightAtUpstream} | ${row.rssBefore} -> ${row.peakRss} -> ${row.rssAfterIdle ?? 'n/a'} | **${row.kbPerRequest}** | ${typeof row.eventLoopP99Ms !== 'number' || Number.isNaN(row.eventLoopP99Ms) ? 'n/a' : `**${row.eventLoopP99Ms}** (max ${row.eventLoopMaxMs})`} | ${row.fdsBefore} -> ${row.peakFds} (limit ${row.nofileLimit}) | ${row.rampSeconds ?? 'n/a'} | ${row.acceptQueue ? `${row.acceptQueue.gateway} of ${row.acceptQueue.backlog}` : 'n/a'} | ${row.seconds} | ${row.date.slice(0, 16)} |`;
  const slow = r.slow
    ? [
        slowRow(r.slow, '**this gateway**'),
        ...(r.slowAsync ? [slowRow(r.slowAsync, 'this gateway, `Prefer: respond-async` (only the upstream call held)')] : []),
        ...(r.slowBaseline ? [slowRow(r.slowBaseline, 'bare Express 5 + `fetch` proxy')] : []),
      ].join('\n')
    : '| not measured | | | | | | | | | | | | |';
  const sp = r.slowPg;
  const slowPg = sp
    ? `| ${sp.replicas} | ${sp.total.toLocaleString('en')} (${sp.keys.toLocaleString('en')} keys x ${sp.perKey}, max_concurrent ${sp.perKeyCap}) | ${sp.delayMs / 1000} s | ${sp.channelCap.toLocaleString('en')} | ${sp.ok.toLocaleString('en')} ok (expected ${sp.expectedOk.toLocaleString('en')}), ${sp.refused.toLocaleString('en')} concurrency_limited (expected ${sp.expectedRefused.toLocaleString('en')}) ${JSON.stringify(sp.codes)} | ${sp.maxInFlightAtUpstream.toLocaleString('en')} / ${sp.upstreamCalls.toLocaleString('en')} | **${sp.exact ? 'yes' : 'NO'}** | ${sp.rssBefore.join(', ')} -> ${sp.peakRss.join(', ')} | **${sp.kbPerRequest}** | **${sp.eventLoopP99Ms.join(', ')}** | ${sp.seconds} | ${sp.date.slice(0, 16)} |`
    : '| not measured | | | | | | | | | | | |';
  const latency = rows
    .map(([name, v]) =>
      v.rps < FIXED_RATE
        ? `| ${name} | over capacity: ${Math.round(v.rps)} req/s at most, so requests queue (p50 ${Math.round(v.pacedP50)}) | | ${v.basePacedP99} | n/a | ${v.burstP99} |`
        : `| ${name} | ${v.pacedP50} | ${v.pacedP99} | ${v.basePacedP99} | **${(v.pacedP99 - v.basePacedP99).toFixed(1)}** | ${v.burstP99} |`,
    )
    .join('\n');
  const a = r.analytics;
  const analytics = a
    ? `| ${a.keys.toLocaleString('en')} | ${a.generations.toLocaleString('en')} over ${a.days} days | ${a.rollupRows.toLocaleString('en')} / ${a.totalRows.toLocaleString('en')} / ${(a.keyDayRows ?? 0).toLocaleString('en')} | **${a.dailyByModel.medianMs}** (${a.dailyByModel.rows} rows) | **${a.topKeys.medianMs}** | ${a.rounds} | ${a.seedSeconds} | ${a.date.slice(0, 16)} |`
    : '| not measured | | | | | | | |';
  const text = `# Benchmarks

Written by \`npm run bench\` (scripts/bench.mjs); the numbers below are from its last run.

- Machine: ${os.cpus().length} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}, Node ${process.version}
- Date: ${new Date().toISOString()} (each row of the new tables says when it was measured; \`--only\` re-measures some rows)
- Gateway path: \`POST /images/generate\` with a client key (auth by hash), request validation, RPM check, credit
  reservation + settlement, usage row, response, request log line (JSON, to a pipe); local provider in \`tiny\` mode.
  Keys are used round-robin from 10,000 distinct keys (and from a table of 1,000,000 in the second row).
- Baseline: a bare Express 5 app (express.json + one handler) answering the same JSON body, running for the
  whole benchmark. Every setup is measured in ${baselineRuns.rounds} rounds that alternate baseline and gateway, so both see the
  same machine weather; the tables give the medians, and each ratio is against the baseline measured in the same rounds.
- Throughput: autocannon in the bench process, ${CONNECTIONS} connections, ${baselineRuns.seconds} s per measurement. "CPU" is the server
  process's CPU time (user + system, all threads, from /proc) per request: steadier than req/s on a noisy machine.
- Latency at ${FIXED_RATE} req/s: an open-loop client sends one request every ${1000 / FIXED_RATE} ms, evenly spaced over keep-alive
  sockets, for ${baselineRuns.seconds} s, and counts latency from when each request was due. (autocannon's \`overallRate\` is not
  a fixed rate: each connection sends its quota for the second back to back at the start of every second; its p99,
  last column, measures those bursts.)
- Baseline RSS after load: ${r.baselineRss} MB. Latencies in ms.

## Throughput (medians of ${baselineRuns.rounds} rounds)

| setup | req/s | baseline req/s | gateway / baseline | CPU µs/req | baseline CPU µs/req | baseline / gateway CPU | p50 at max | p99 at max | RSS MB after load | non-2xx |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${throughput}

## Latency at a fixed ${FIXED_RATE} req/s (medians of ${baselineRuns.rounds} rounds)

| setup | p50 | p99 | baseline p99 | added p99 | p99 with autocannon overallRate (bursts) |
| --- | --- | --- | --- | --- | --- |
${latency}

## Upstream path (gateway -> fake Ark upstream, b64 answers; medians of alternating rounds)

Gateway: full path (auth by key hash, validation, RPM, credits, usage row, env channel with its limits, request
log) to a local fake answering in Ark's wire format (\`scripts/bench-fake-ark.cjs\`), ${UPSTREAM_CONNECTIONS} connections,
keys round-robin over 1,000. Baselines on the same fake in the same rounds: a bare Express 5 app forwarding with
the global \`fetch\` (\`scripts/bench-proxy-baseline.cjs\`), and Portkey's open-source gateway
(\`@portkey-ai/gateway\`, \`x-portkey-provider: openai\` + \`x-portkey-custom-host\`). CPU is each server process's own.

| setup | req/s | Express+fetch req/s | gateway / Express+fetch | Portkey req/s | gateway / Portkey | CPU µs/req | Express+fetch CPU µs/req | Portkey CPU µs/req | RSS MB after load | non-2xx | measured |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${upstreamThroughput}

The hop itself (target <= 150 µs): the gateway process above, after its rounds, measured in alternating rounds with the
local provider (no upstream) and through the channel to the fake; the difference in CPU per request:

${hopLines || '- not measured'}

At a fixed ${UPSTREAM_RATE} req/s (open loop, evenly spaced, latency from when each request was due), ms:

| setup | p50 | p99 | Express+fetch p99 | added p99 | CPU µs/req | Express+fetch CPU µs/req |
| --- | --- | --- | --- | --- | --- | --- |
${upstreamLatency}

## Upstream path, OpenAI-compatible (issue 40's setup; medians of alternating rounds)

\`npm run bench -- --only openai-compat --seconds 8\`. \`POST /v1/images/generations\` with \`response_format: b64_json\` to a
fake OpenAI-compatible upstream answering at once with a 1x1 PNG as \`b64_json\` (\`scripts/bench-fake-ark.cjs\` with
\`FAKE_WIRE=openai\`). This gateway on SQLite, \`LOCAL_PROVIDER_MODE=tiny\`, reaches it as an OpenAI-compatible environment
account (\`OPENAI_COMPAT_BASE_URL\`, provider \`${COMPAT_PROVIDER}\`, a catalog model on it), keys round-robin over 1,000. In each round
every target runs ${UPSTREAM_CONNECTIONS} connections for the round's seconds, then a fixed ${UPSTREAM_RATE} req/s (open loop, 2 s not counted), the
order of the targets rotated between rounds. CPU is each server process's own (user + system, all threads, /proc).
Latencies in ms.

| target | req/s | CPU µs/req | this gateway's CPU / target's | p50 at ${UPSTREAM_RATE}/s | p99 at ${UPSTREAM_RATE}/s | added p99 vs upstream direct | CPU µs/req at ${UPSTREAM_RATE}/s | non-2xx |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
${openaiCompat}

## The hop of every wire format, in one process (issue 40 target 1: at most 80 µs)

\`npm run bench -- --only hop-matrix\`. One gateway on SQLite reaching a fake Ark (\`ARK_BASE_URL\`) and a fake OpenAI-compatible
upstream (\`OPENAI_COMPAT_BASE_URL\`, provider \`compat\`), both answering the 1x1 PNG as \`b64_json\`, and serving the local
provider (\`tiny\`); each route (the native \`POST /images/generate\`, the OpenAI-compatible \`POST /v1/images/generations\`)
with each model, ${UPSTREAM_CONNECTIONS} connections, alternating rounds. The hop is the wire format's CPU per request less the local
model's on the same route in the same round (µs).

| wire format | CPU µs/req | local provider CPU µs/req | hop (per round) | measured |
| --- | --- | --- | --- | --- |
${hopMatrix}

## Above capacity (issue 40 §3: refused at once, or served; never a wait that ends in a failure)

\`npm run bench -- --only overload\`. The local provider (\`tiny\`), 1,000 keys, the default \`SHED_EVENT_LOOP_DELAY_MS\` (1 s) and
\`SHED_DATABASE_WAIT_MS\` (100 ms). Capacity is the closed-loop req/s at ${OVERLOAD_CAPACITY_CONNECTIONS} connections, measured just before; then an open
loop at ${OVERLOAD_LOADS.join(' and ')} times it for the round's seconds, over at most ${OVERLOAD_CLIENTS.toLocaleString('en')} sockets (clients waiting at once: the
requests beyond them wait in the client, as they would in clients or the kernel's accept queue). Each answer is counted by status
(or connection error) with its latency in ms from when it was due, and "answered in": from when it got its socket (the
gateway's own time); "shed" is the gateway's \`creative_gateway_overload_refusals_total\` over the phase.

| engine | capacity req/s | offered | requests | answers by status (latency ms) | shed | event-loop delay p99 / max ms | measured |
| --- | --- | --- | --- | --- | --- | --- | --- |
${overload}

## Slow generations (requests held in flight at once, fake upstream answering after a delay; SQLite)

\`npm run bench -- --only slow --inflight N --delay MS\`. Memory per request = (peak RSS during the hold - RSS before) / requests held at
once at the upstream (N, or fewer for the asynchronous row, whose first calls end before its last ones start); the gateway runs with \`npm start\`'s node flags;
event-loop delay p99 is the gateway's own \`monitorEventLoopDelay\` (prom-client's
\`nodejs_eventloop_lag_p99_seconds\` on the internal \`/metrics\`, reset just before the burst). The client keeps at most 2,000 requests
sent and not yet at the fake upstream (the gateway's accept queue is 4,096), so the ramp runs at the gateway's admission rate.

| server | in flight | upstream delay | answers | max in flight at the upstream | RSS MB before -> peak -> 30 s after | KB per request | event-loop p99 ms | open fds before -> peak | all sent after s | longest accept queue | seconds | measured |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${slow}

## Slow generations on 3 replicas (PostgreSQL + Redis), with limits that bind

\`npm run bench -- --only slow-pg\`. Three gateway processes on one PostgreSQL database and one Redis; each key has a
\`max_concurrent\` below the requests sent for it (a key's requests are sent one after the other, to the three
replicas in turn, at ${sp?.rate ?? 500} req/s in all), and the only channel is a database channel whose \`max_concurrency\` is below
what the keys admit, so the rest wait in its queue for the first wave to end. Exact: the refusals are exactly the
requests over each key's cap, every admitted request succeeds, the fake upstream sees exactly the admitted calls and
never more than the channel's cap at once (and reaches it). KB per request = the replicas' RSS growth / admitted requests.

| replicas | requests | upstream delay | channel cap | answers | max at once / calls at the upstream | exact | RSS MB before -> peak | KB per request | event-loop p99 ms | seconds | measured |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${slowPg}

## Usage analytics (GET /admin/usage on PostgreSQL, rollups only)

\`npm run bench -- --only analytics\` (scripts/bench-analytics.mjs). Keys and hourly rollups equal to the generations below are
seeded straight into the gateway's tables with \`generate_series\` (skewed keys, 4 models, successes, failures and cancels); then,
through the HTTP API with the admin secret, the median of N timed requests after one warm-up: a daily query over the whole range
grouped by model (target <= 100 ms) and the top 20 keys by credits over the same range (target <= 200 ms). Times in ms.

| keys | generations | rollup rows (per hour and key / per hour / per day and key) | daily by model | top 20 keys | rounds | seed s | measured |
| --- | --- | --- | --- | --- | --- | --- | --- |
${analytics}
`;
  // Keep the hand-written analysis below the generated tables across runs.
  const previous = fs.existsSync(path.join(root, 'BENCHMARKS.md')) ? fs.readFileSync(path.join(root, 'BENCHMARKS.md'), 'utf8') : '';
  const analysis = previous.includes('\n## Against the targets') ? previous.slice(previous.indexOf('\n## Against the targets')) : '';
  fs.writeFileSync(path.join(root, 'BENCHMARKS.md'), text + analysis);
  console.log(text);
}

await main();
