// The analytics row of `npm run bench` (issue #28 §1): GET /admin/usage on PostgreSQL with KEYS keys and rollups
// equal to GENERATIONS generations over DAYS days, seeded directly with generate_series (no generation is run).
// Times, through the HTTP API (median of ROUNDS, after one warm-up each): a DAYS-day daily query grouped by model
// (target <= 100 ms) and the top 20 keys by credits over the same range (target <= 200 ms), both over the last DAYS
// whole UTC days (today included).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const HOUR = 3_600_000;
const DAY = 86_400_000;
const MODELS = [
  ['seedream-4.0', 'jimeng', 'chn_envJimengArk'],
  ['seedream-4.5', 'jimeng', 'chn_envJimengArk'],
  ['jimeng-t2i-v40', 'jimeng', 'chn_envJimengVisual'],
  ['local-1', 'local', 'chn_envLocal'],
];
/** Requests per seeded rollup row: 1..5, 3 on average. */
const MEAN_REQUESTS_PER_ROW = 3;

/** Keys and rollups straight into the gateway's tables (its own migrations made them). */
export async function seedAnalytics(url, { keys, generations, days, now }) {
  const { Client } = require('pg');
  const client = new Client({ connectionString: url });
  await client.connect();
  const started = Date.now();
  await client.query(
    `INSERT INTO api_keys (id, key_hash, hint, name, owner, status, credits_quota, credits_used, quota_period_days, period_started_at,
       rate_limit_rpm, allowed_providers, created_at, updated_at, metadata)
     SELECT 'key_bench' || i, md5('bench' || i), 'hyai_be...nch', 'bench ' || i, 'owner' || (i % 5000) || '@example.com', 'active',
       1000000000, 0, 30, $1, 1000, '["local","jimeng"]', $1, $1, jsonb_build_object('team', 'team' || (i % 50))
     FROM generate_series(0, $2 - 1) AS i`,
    [now, keys],
  );
  const hours = days * 24;
  const end = now - (now % HOUR);
  const rowsPerHour = Math.ceil(generations / hours / MEAN_REQUESTS_PER_ROW);
  // Skewed keys (a few heavy, most light: random()^3 over the ids), 4 models, 93% succeeded, 4% failed on two codes,
  // 3% canceled; each row's latencies in one of 8 buckets around 2-8 s. Rows that meet on one rollup key are summed.
  await client.query(
    `INSERT INTO usage_rollups (hour_start, key_id, model, provider, channel_id, status, error_code, requests, images, credits,
       lat_28, lat_29, lat_30, lat_31, lat_32, lat_33, lat_34, lat_35)
     SELECT hour_start, key_id, model, provider, channel_id, status, error_code, sum(requests), sum(images), sum(credits),
       sum(l28), sum(l29), sum(l30), sum(l31), sum(l32), sum(l33), sum(l34), sum(l35)
     FROM (
       SELECT $1::bigint - h * ${HOUR}::bigint AS hour_start, 'key_bench' || floor($2 * power(random(), 3))::int AS key_id,
         (ARRAY[${MODELS.map(([m]) => `'${m}'`).join(',')}])[m + 1] AS model, (ARRAY[${MODELS.map(([, p]) => `'${p}'`).join(',')}])[m + 1] AS provider,
         CASE WHEN s >= 97 THEN '' ELSE (ARRAY[${MODELS.map(([, , c]) => `'${c}'`).join(',')}])[m + 1] END AS channel_id,
         CASE WHEN s < 93 THEN 'succeeded' WHEN s < 97 THEN 'failed' ELSE 'canceled' END AS status,
         CASE WHEN s < 93 THEN '' WHEN s < 95 THEN 'provider_timeout' WHEN s < 97 THEN 'provider_error' ELSE 'canceled' END AS error_code,
         r AS requests, CASE WHEN s < 93 THEN r * (1 + m % 2) ELSE 0 END AS images,
         CASE WHEN s < 93 THEN r * (1 + m % 2) * (m + 1) * 10 WHEN s >= 97 THEN r ELSE 0 END AS credits,
         ${[28, 29, 30, 31, 32, 33, 34, 35].map((b) => `CASE WHEN s < 93 AND lb = ${b} THEN r END AS l${b}`).join(', ')}
       FROM (
         SELECT h, (j % 4) AS m, floor(random() * 100)::int AS s, 1 + (j % 5) AS r, 28 + floor(random() * 8)::int AS lb
         FROM generate_series(1, $3) AS h, generate_series(1, $4) AS j
       ) g
     ) x
     GROUP BY 1, 2, 3, 4, 5, 6, 7`,
    [end, keys, hours, rowsPerHour],
  );
  await client.query(
    `INSERT INTO usage_rollup_totals (hour_start, model, provider, channel_id, status, error_code, requests, images, credits,
       lat_28, lat_29, lat_30, lat_31, lat_32, lat_33, lat_34, lat_35)
     SELECT hour_start, model, provider, channel_id, status, error_code, sum(requests), sum(images), sum(credits),
       sum(lat_28), sum(lat_29), sum(lat_30), sum(lat_31), sum(lat_32), sum(lat_33), sum(lat_34), sum(lat_35)
     FROM usage_rollups GROUP BY 1, 2, 3, 4, 5, 6`,
  );
  await client.query(
    `INSERT INTO usage_key_days (day_start, key_id, status, error_code, requests, images, credits,
       lat_28, lat_29, lat_30, lat_31, lat_32, lat_33, lat_34, lat_35)
     SELECT hour_start - hour_start % ${DAY}, key_id, status, error_code, sum(requests), sum(images), sum(credits),
       sum(lat_28), sum(lat_29), sum(lat_30), sum(lat_31), sum(lat_32), sum(lat_33), sum(lat_34), sum(lat_35)
     FROM usage_rollups GROUP BY 1, 2, 3, 4`,
  );
  await client.query(
    `INSERT INTO usage_day_totals (day_start, model, provider, channel_id, status, error_code, requests, images, credits,
       lat_28, lat_29, lat_30, lat_31, lat_32, lat_33, lat_34, lat_35)
     SELECT hour_start - hour_start % ${DAY}, model, provider, channel_id, status, error_code, sum(requests), sum(images), sum(credits),
       sum(lat_28), sum(lat_29), sum(lat_30), sum(lat_31), sum(lat_32), sum(lat_33), sum(lat_34), sum(lat_35)
     FROM usage_rollup_totals GROUP BY 1, 2, 3, 4, 5, 6`,
  );
  // Calendar months (UTC), as the settlement computes them.
  await client.query(
    `INSERT INTO usage_key_months (month_start, key_id, requests, succeeded, failed, canceled, images, credits)
     SELECT CAST(extract(epoch FROM date_trunc('month', to_timestamp(day_start / 1000) AT TIME ZONE 'UTC')) AS bigint) * 1000, key_id,
       sum(requests), sum(CASE WHEN status = 'succeeded' THEN requests ELSE 0 END), sum(CASE WHEN status = 'failed' THEN requests ELSE 0 END),
       sum(CASE WHEN status = 'canceled' THEN requests ELSE 0 END), sum(images), sum(credits)
     FROM usage_key_days GROUP BY 1, 2`,
  );
  await client.query('VACUUM ANALYZE usage_key_months');
  await client.query('VACUUM ANALYZE usage_day_totals');
  await client.query('VACUUM ANALYZE usage_key_days');
  await client.query('VACUUM ANALYZE usage_rollups');
  await client.query('VACUUM ANALYZE usage_rollup_totals');
  await client.query('ANALYZE api_keys');
  const { rows } = await client.query(
    `SELECT (SELECT count(*) FROM usage_rollups)::bigint AS rollups, (SELECT count(*) FROM usage_rollup_totals)::bigint AS totals,
       (SELECT count(*) FROM usage_key_days)::bigint AS key_days, (SELECT count(*) FROM usage_key_months)::bigint AS key_months,
       (SELECT count(*) FROM usage_day_totals)::bigint AS day_totals, (SELECT sum(requests) FROM usage_rollups)::bigint AS generations`,
  );
  await client.end();
  return {
    rollupRows: Number(rows[0].rollups),
    totalRows: Number(rows[0].totals),
    keyDayRows: Number(rows[0].key_days),
    keyMonthRows: Number(rows[0].key_months),
    dayTotalRows: Number(rows[0].day_totals),
    generations: Number(rows[0].generations),
    seedSeconds: Math.round((Date.now() - started) / 1000),
    end,
  };
}

async function timed(url, path, adminSecret) {
  const started = performance.now();
  const response = await fetch(`${url}${path}`, { headers: { Authorization: `Bearer ${adminSecret}` } });
  const body = await response.json();
  const ms = performance.now() - started;
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(body)}`);
  return { ms, rows: body.data.length };
}

/**
 * `options`: keys, generations, days, rounds; `bench`: the bench's process helpers (startProcess, stop, gatewayEnv,
 * scratchDatabase, median, adminSecret).
 */
export async function measureAnalytics(options, bench) {
  const database = await bench.scratchDatabase('postgres', 0, '["local"]');
  try {
    const seeded = await seedAnalytics(database.url, { ...options, now: Date.now() });
    console.log('analytics seeded', JSON.stringify(seeded));
    const { child, url } = await bench.startProcess(['dist/src/main.js'], bench.gatewayEnv(database.url, database.env));
    try {
      const today = seeded.end - (seeded.end % DAY);
      const from = new Date(today - (options.days - 1) * DAY).toISOString();
      const to = new Date(today + DAY).toISOString();
      const queries = {
        dailyByModel: `/admin/usage?from=${from}&to=${to}&bucket=day&group_by=model&limit=1000`,
        topKeys: `/admin/usage?from=${from}&to=${to}&group_by=key&order=credits_desc&limit=20`,
      };
      const results = {};
      for (const [name, path] of Object.entries(queries)) {
        await timed(url, path, bench.adminSecret);
        const times = [];
        let rows = 0;
        for (let round = 0; round < options.rounds; round += 1) {
          const once = await timed(url, path, bench.adminSecret);
          times.push(once.ms);
          rows = once.rows;
        }
        results[name] = { medianMs: Number(bench.median(times).toFixed(1)), minMs: Number(Math.min(...times).toFixed(1)), maxMs: Number(Math.max(...times).toFixed(1)), rows };
        console.log('analytics', name, JSON.stringify(results[name]));
      }
      return { date: new Date().toISOString(), keys: options.keys, days: options.days, rounds: options.rounds, ...seeded, ...results };
    } finally {
      await bench.stop(child);
    }
  } finally {
    await database.drop();
  }
}
