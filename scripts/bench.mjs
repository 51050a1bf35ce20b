// `npm run bench`: throughput and latency of the full gateway path against a bare Express 5 app,
// measured in one run on this machine with autocannon, then written to BENCHMARKS.md.
// The local provider runs in `tiny` mode (a fixed 1x1 PNG) so the provider costs ~0.
// Options: BENCH_SECONDS (default 10), BENCH_CONNECTIONS (default 50), BENCH_ROUNDS (default 3), BENCH_SKIP_MILLION=1,
// BENCH_SKIP_PG=1, BENCH_CPU_PROF=1 (profiles to bench-profiles/), BENCH_NODE_FLAGS (extra node flags for the gateway).
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import autocannon from 'autocannon';

const require = createRequire(import.meta.url);
const root = path.resolve(import.meta.dirname, '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const FIXED_RATE = 1000;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ADMIN_SECRET = 'bench-admin-secret-0123456789';
const SERVICE = { id: 'bench.access', secret: 'bench-service-secret-0123' };

execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
const { generateKeySecret, hashKey, keyHint } = require(path.join(root, 'dist/src/keys/key-secret.js'));

const BODY = JSON.stringify({ prompt: 'a lighthouse at dawn', model: 'local-1', response_format: 'b64_json' });

function startProcess(args, env) {
  const child = spawn(process.execPath, args, { cwd: root, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buffer = '';
    const onData = (chunk) => {
      buffer += chunk.toString();
      const match = /"port":(\d+)/.exec(buffer) ?? /^listening (\d+)$/m.exec(buffer);
      if (match) {
        child.stdout.off('data', onData);
        child.stdout.resume(); // discard the request logs, as a log shipper would
        resolve({ child, url: `http://127.0.0.1:${match[1]}` });
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`process exited with ${code}: ${buffer}`)));
  });
}

const stop = (child) => new Promise((resolve) => {
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

/**
 * Closed-loop load at full speed (autocannon). Also returns the server's CPU time per request,
 * which is steadier across noisy runs than requests/s.
 */
async function load(url, keys, options = {}) {
  const cpuBefore = options.pid ? cpuSeconds(options.pid) : 0;
  let i = 0;
  const result = await autocannon({
    url: `${url}/images/generate`,
    method: 'POST',
    connections: options.connections ?? CONNECTIONS,
    duration: SECONDS,
    ...(options.rate ? { overallRate: options.rate } : {}),
    headers: { 'content-type': 'application/json' },
    body: BODY,
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
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, bad, total: result.requests.total, cpuUs };
}

/**
 * Open-loop load at a fixed rate, evenly spaced (one request every 1000/rate ms, over a pool of
 * keep-alive sockets). autocannon's overallRate is not that: each connection sends its quota for
 * the second back to back at the start of every second, so its latencies measure bursts.
 * Latency counts from when a request was due, not when it was sent (no coordinated omission).
 */
async function paced(url, keys, rate, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const total = rate * seconds;
  const interval = 1000 / rate;
  const latencies = [];
  let bad = 0;
  const started = performance.now();
  await new Promise((resolve) => {
    let sent = 0;
    let done = 0;
    const finish = (due, ok) => {
      latencies.push(performance.now() - due);
      if (!ok) bad += 1;
      if (++done === total) resolve();
    };
    const tick = () => {
      const dueNow = Math.min(total, Math.floor((performance.now() - started) / interval) + 1);
      for (; sent < dueNow; sent += 1) {
        const due = started + sent * interval;
        const key = keys[sent % keys.length];
        const request = http.request(`${url}/images/generate`, {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        });
        request.on('response', (response) => {
          response.resume();
          response.on('end', () => finish(due, response.statusCode === 200));
        });
        request.on('error', () => finish(due, false));
        request.end(BODY);
      }
      if (sent < total) setTimeout(tick, Math.max(0, started + sent * interval - performance.now()));
    };
    tick();
  });
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q) => Number(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))].toFixed(2));
  return { rps: rate, p50: at(0.5), p99: at(0.99), bad, total };
}

/** Inserts `count` keys straight into SQLite (far faster than the API) and returns their secrets. */
function seedSqlite(file, count, keep) {
  const Database = require('better-sqlite3');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  const insert = db.prepare(`INSERT INTO api_keys (id, key_hash, hint, name, owner, status, credits_quota, credits_used, quota_period_days,
    period_started_at, rate_limit_rpm, allowed_providers, expires_at, created_at, updated_at, disabled_at, last_used_at)
    VALUES (?, ?, ?, 'bench', ?, 'active', 1000000000, 0, 30, ?, 100000, '["local"]', NULL, ?, ?, NULL, NULL)`);
  const secrets = [];
  const now = Date.now();
  const batch = db.transaction((n, offset) => {
    for (let j = 0; j < n; j += 1) {
      const secret = generateKeySecret();
      if (secrets.length < keep) secrets.push(secret);
      insert.run(`key_bench${offset + j}${randomBytes(4).toString('hex')}`, hashKey(secret), keyHint(secret), `owner-${(offset + j) % 1000}`, now, now, now);
    }
  });
  for (let offset = 0; offset < count; offset += 50_000) batch(Math.min(50_000, count - offset), offset);
  db.close();
  return secrets;
}

async function seedPostgres(url, count) {
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
      params.push(`key_bench${offset + j}`, hashKey(secret), keyHint(secret), now);
      const b = params.length - 4;
      values.push(`($${b + 1}, $${b + 2}, $${b + 3}, 'bench', 'bench', 'active', 1000000000, 0, 30, $${b + 4}, 100000, '["local"]', NULL, $${b + 4}, $${b + 4}, NULL, NULL)`);
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
  // Every generated image is stored (README "Image storage"): in a scratch directory here.
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
async function measureAgainstBaseline(name, baseline, env, keys) {
  const { child, url } = await startProcess(
    [
      ...(process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${root}/bench-profiles`] : []),
      'dist/src/main.js',
    ],
    env,
  );
  await load(url, keys, { connections: 10 }); // warm-up: JIT, caches, connection pools
  const pairs = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const pair = {
      baseMax: await load(baseline.url, [], { pid: baseline.child.pid }),
      max: await load(url, keys, { pid: child.pid }),
      basePaced: await paced(baseline.url, [], FIXED_RATE, SECONDS),
      paced: await paced(url, keys, FIXED_RATE, SECONDS),
    };
    pairs.push(pair);
    console.log(name, `round ${round + 1}`, JSON.stringify(pair));
  }
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
  };
}

async function main() {
  const results = {};
  // 1. Baseline: bare Express 5 answering the same JSON body; it runs beside every setup.
  const baseline = await startProcess(['scripts/bench-baseline.cjs'], {});
  await load(baseline.url, [], { connections: 10 });
  results.baselineRss = rssMb(baseline.child.pid);
  // 2. and 3. The full gateway path on SQLite, 10,000 keys then 1,000,000 keys.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-bench-'));
  const file = path.join(dir, 'gateway.db');
  {
    // Let the gateway create the schema, then seed.
    const { child } = await startProcess(['dist/src/main.js'], gatewayEnv(file));
    await stop(child);
  }
  const keys = seedSqlite(file, 10_000, 10_000);
  results.sqlite10k = await measureAgainstBaseline('sqlite 10k keys', baseline, gatewayEnv(file), keys);
  if (!process.env.BENCH_SKIP_MILLION) {
    seedSqlite(file, 990_000, 0);
    results.sqlite1m = await measureAgainstBaseline('sqlite 1M keys', baseline, gatewayEnv(file), keys);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  // 4. PostgreSQL + Redis.
  if (!process.env.BENCH_SKIP_PG) {
    const { Client } = require('pg');
    const admin = new Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
    await admin.connect();
    const name = `cgw_bench_${Date.now()}`;
    await admin.query(`CREATE DATABASE ${name}`);
    const url = `postgres://postgres@127.0.0.1:5432/${name}`;
    const env = gatewayEnv(url, { REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: `${name}:`, DB_POOL_SIZE: '20' });
    {
      const { child } = await startProcess(['dist/src/main.js'], env);
      await stop(child);
    }
    const pgKeys = await seedPostgres(url, 10_000);
    results.postgres = await measureAgainstBaseline('postgres+redis 10k keys', baseline, env, pgKeys);
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  }
  await stop(baseline.child);
  writeReport(results);
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
        `| ${name} | ${Math.round(v.rps)} | ${Math.round(v.baseRps)} | **${pct(v.rps, v.baseRps)}** | ${v.cpuUs} | ${v.baseCpuUs} | ${pct(v.baseCpuUs, v.cpuUs)} | ${v.p50} | ${v.p99} | ${v.rss} | ${v.bad} |`,
    )
    .join('\n');
  const latency = rows
    .map(
      ([name, v]) =>
        v.rps < FIXED_RATE
          ? `| ${name} | over capacity: ${Math.round(v.rps)} req/s at most, so requests queue (p50 ${Math.round(v.pacedP50)}) | | ${v.basePacedP99} | n/a | ${v.burstP99} |`
          : `| ${name} | ${v.pacedP50} | ${v.pacedP99} | ${v.basePacedP99} | **${(v.pacedP99 - v.basePacedP99).toFixed(1)}** | ${v.burstP99} |`,
    )
    .join('\n');
  const text = `# Benchmarks

Written by \`npm run bench\` (scripts/bench.mjs); the numbers below are from its last run.

- Machine: ${os.cpus().length} cores (${cpu}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}, Node ${process.version}
- Date: ${new Date().toISOString()}
- Gateway path: \`POST /images/generate\` with a client key (auth by hash), request validation, RPM check, credit
  reservation + settlement, usage row, response, request log line (JSON, to a pipe); local provider in \`tiny\` mode.
  Keys are used round-robin from 10,000 distinct keys (and from a table of 1,000,000 in the second row).
- Baseline: a bare Express 5 app (express.json + one handler) answering the same JSON body, running for the
  whole benchmark. Every setup is measured in ${ROUNDS} rounds that alternate baseline and gateway, so both see the
  same machine weather; the tables give the medians, and each ratio is against the baseline measured in the same rounds.
- Throughput: autocannon in the bench process, ${CONNECTIONS} connections, ${SECONDS} s per measurement. "CPU" is the server
  process's CPU time (user + system, all threads, from /proc) per request: steadier than req/s on a noisy machine.
- Latency at ${FIXED_RATE} req/s: an open-loop client sends one request every ${1000 / FIXED_RATE} ms, evenly spaced over keep-alive
  sockets, for ${SECONDS} s, and counts latency from when each request was due. (autocannon's \`overallRate\` is not
  a fixed rate: each connection sends its quota for the second back to back at the start of every second; its p99,
  last column, measures those bursts.)
- Baseline RSS after load: ${r.baselineRss} MB. Latencies in ms.

## Throughput (medians of ${ROUNDS} rounds)

| setup | req/s | baseline req/s | gateway / baseline | CPU µs/req | baseline CPU µs/req | baseline / gateway CPU | p50 at max | p99 at max | RSS MB after load | non-2xx |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${throughput}

## Latency at a fixed ${FIXED_RATE} req/s (medians of ${ROUNDS} rounds)

| setup | p50 | p99 | baseline p99 | added p99 | p99 with autocannon overallRate (bursts) |
| --- | --- | --- | --- | --- | --- |
${latency}
`;
  // Keep the hand-written analysis below the generated tables across runs.
  const previous = fs.existsSync(path.join(root, 'BENCHMARKS.md')) ? fs.readFileSync(path.join(root, 'BENCHMARKS.md'), 'utf8') : '';
  const analysis = previous.includes('\n## Against the targets') ? previous.slice(previous.indexOf('\n## Against the targets')) : '';
  fs.writeFileSync(path.join(root, 'BENCHMARKS.md'), text + analysis);
  console.log(text);
}

await main();
