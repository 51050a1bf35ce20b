// `node scripts/bench-hop-matrix.mjs` (S=seconds per measurement, R=rounds; T=route:model,...): the hop of every wire
// format in one gateway process. The gateway on SQLite reaches a fake Ark (ARK_BASE_URL) and a fake OpenAI-compatible
// upstream (OPENAI_COMPAT_BASE_URL, provider `compat`), both scripts/bench-fake-ark.cjs answering a 1x1 PNG as b64_json,
// and serves the local provider (tiny); each target (the native route or the OpenAI-compatible one, with each model) is
// loaded at 32 connections in alternating rounds, and its CPU per request read from /proc. The hop of a wire format is
// its row less the local row of the same route. Prints medians; writes nothing (BENCHMARKS.md quotes a run). Needs `npm run build` first.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
const root = path.resolve(import.meta.dirname, '..');
const require = createRequire(root + '/package.json');
// Before better-sqlite3 loads (native, built for Node >= 22: Node 20 crashes on it).
require('./scripts/supported-node.js').requireSupportedNode();
const autocannon = require('autocannon');
const { generateKeySecret, hashKey, keyHint } = require(path.join(root, 'dist/src/keys/key-secret.js'));
const SECONDS = Number(process.env.S ?? 4),
  ROUNDS = Number(process.env.R ?? 3);
function start(args, env) {
  const child = spawn(process.execPath, args, { cwd: root, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve) => {
    let buf = '';
    const on = (c) => {
      buf += c;
      const m = /"port":(\d+),"internal_port"/.exec(buf) ?? /^listening (\d+)$/m.exec(buf);
      if (m) {
        child.stdout.off('data', on);
        child.stdout.resume();
        resolve({ child, url: `http://127.0.0.1:${m[1]}` });
      }
    };
    child.stdout.on('data', on);
  });
}
const cpu = (pid) => {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hop-'));
const file = path.join(dir, 'g.db');
const env = (extra) => ({
  NODE_ENV: 'production',
  PORT: '0',
  INTERNAL_PORT: '0',
  HOST: '127.0.0.1',
  ADMIN_SECRET: 'bench-admin-secret-0123456789',
  CF_ACCESS_CLIENT_ID: 'a.access',
  CF_ACCESS_CLIENT_SECRET: 'bench-service-secret-0123',
  DATABASE_URL: file,
  LOCAL_PROVIDER_MODE: 'tiny',
  LOG_LEVEL: 'info',
  CHANNEL_SEALING_KEY: 'b'.repeat(64),
  IMAGE_URL_SIGNING_KEY: 'bench-image-url-signing-key-0123456789abcdef',
  IMAGE_DIRECTORY: path.join(os.tmpdir(), 'cgw-bench-images'),
  ...extra,
});
const first = await start(['dist/src/main.js'], env({}));
first.child.kill();
await new Promise((r) => first.child.on('exit', r));
const Database = require('better-sqlite3');
const db = new Database(file);
const keys = [];
const now = Date.now();
const ins = db.prepare(
  `INSERT INTO api_keys (id, key_hash, hint, name, owner, status, credits_quota, credits_used, quota_period_days, period_started_at, rate_limit_rpm, allowed_providers, expires_at, created_at, updated_at, disabled_at, last_used_at) VALUES (?, ?, ?, 'bench', 'o', 'active', 1000000000, 0, 30, ?, 100000, ?, NULL, ?, ?, NULL, NULL)`,
);
for (let i = 0; i < 1000; i++) {
  const k = generateKeySecret();
  keys.push(k);
  ins.run(`key_hop${i}`, hashKey(k), keyHint(k), now, '["jimeng","compat","local"]', now, now);
}
db.close();
const ark = await start(['scripts/bench-fake-ark.cjs'], {});
const oai = await start(['scripts/bench-fake-ark.cjs'], { FAKE_WIRE: 'openai' });
const gw = await start(
  ['dist/src/main.js'],
  env({
    ARK_API_KEY: 'k',
    ARK_BASE_URL: ark.url,
    PROVIDER_JIMENG_MAX_CONCURRENCY: '64',
    OPENAI_COMPAT_BASE_URL: oai.url,
    OPENAI_COMPAT_API_KEY: 'k',
    OPENAI_COMPAT_PROVIDER_NAME: 'compat',
    PROVIDER_COMPAT_MAX_CONCURRENCY: '64',
    MODEL_CATALOG: JSON.stringify({ models: [{ model: 'compat-image', provider: 'compat', upstream_model: 'compat-image-1', credits_per_image: 1 }] }),
  }),
);
const body = (model) => JSON.stringify({ prompt: 'a lighthouse at dawn', model, response_format: 'b64_json' });
const targets = (process.env.T ?? 'native:jimeng-4.5,native:local-1,v1:compat-image,v1:local-1,native:compat-image,v1:jimeng-4.5').split(',').map((t) => {
  const [p, m] = t.split(':');
  return { name: t, path: p === 'v1' ? '/v1/images/generations' : '/images/generate', model: m };
});
async function load(t, seconds, conns = 32) {
  let i = 0;
  const c0 = cpu(gw.child.pid);
  const r = await autocannon({
    url: gw.url + t.path,
    method: 'POST',
    connections: conns,
    duration: seconds,
    headers: { 'content-type': 'application/json' },
    body: body(t.model),
    requests: [{ setupRequest: (q) => ({ ...q, headers: { ...q.headers, authorization: `Bearer ${keys[i++ % keys.length]}` } }) }],
  });
  return { rps: Math.round(r.requests.average), cpuUs: Math.round(((cpu(gw.child.pid) - c0) * 1e6) / r.requests.total), bad: r.non2xx + r.errors };
}
for (const t of targets) console.log('warm', t.name, JSON.stringify(await load(t, 2, 10)));
const res = Object.fromEntries(targets.map((t) => [t.name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < targets.length; i++) {
    const t = targets[(i + round) % targets.length];
    const r = await load(t, SECONDS);
    res[t.name].push(r.cpuUs);
    if (r.bad) console.log('bad', t.name, r.bad);
  }
  console.log('round', round, JSON.stringify(res));
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const [k, v] of Object.entries(res)) console.log(k.padEnd(22), med(v), JSON.stringify(v));
for (const p of [gw, ark, oai]) p.child.kill();
fs.rmSync(dir, { recursive: true, force: true });
