import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/config';

const quiet = () => undefined;

describe('configuration', () => {
  const dir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-config-'));

  it('zero configuration: defaults, and an admin secret generated once, stored 0600, printed once', () => {
    const db = path.join(dir(), 'gw.db');
    const printed: string[] = [];
    const first = loadConfig({ DATABASE_URL: db }, (line) => printed.push(line));
    expect(first).toMatchObject({ port: 8080, validateResponses: false, bodyLimitBytes: 65536 });
    // Every wait on a dependency is bounded by default.
    expect(first).toMatchObject({
      dbConnectTimeoutMs: 2000,
      dbStatementTimeoutMs: 5000,
      redisConnectTimeoutMs: 1000,
      redisCommandTimeoutMs: 500,
      rateLimitRedisFallback: 'refuse',
      dependencyStartupTimeoutMs: 30_000,
    });
    const file = path.join(path.dirname(db), 'admin-secret');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(printed.join('\n')).toContain(first.adminSecret);
    const again: string[] = [];
    const second = loadConfig({ DATABASE_URL: db }, (line) => again.push(line));
    expect(second.adminSecret).toBe(first.adminSecret);
    expect(again.join('\n')).not.toContain(first.adminSecret);
  });

  it('zero configuration: a service token pair for the internal API, generated once, stored 0600, printed once', () => {
    const db = path.join(dir(), 'gw.db');
    const printed: string[] = [];
    const first = loadConfig({ DATABASE_URL: db }, (line) => printed.push(line));
    const [token] = first.serviceTokens;
    expect(token?.clientSecret.length).toBeGreaterThanOrEqual(32);
    expect(fs.statSync(path.join(path.dirname(db), 'service-token')).mode & 0o777).toBe(0o600);
    expect(printed.join('\n')).toContain(token!.clientSecret);
    const again: string[] = [];
    expect(loadConfig({ DATABASE_URL: db }, (line) => again.push(line)).serviceTokens).toEqual([token]);
    expect(again.join('\n')).not.toContain(token!.clientSecret);
  });

  it('refuses to start in production without ADMIN_SECRET or service tokens', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', DATABASE_URL: path.join(dir(), 'x.db') }, quiet)).toThrow(/ADMIN_SECRET is required/);
    expect(() => loadConfig({ NODE_ENV: 'production', ADMIN_SECRET: 'a-long-enough-secret', DATABASE_URL: path.join(dir(), 'x.db') }, quiet)).toThrow(
      /CF_ACCESS_CLIENT_ID and CF_ACCESS_CLIENT_SECRET are required/,
    );
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT must be an integer/],
    [{ ADMIN_SECRET: 'short' }, /at least 16/],
    [{ VALIDATE_RESPONSES: 'maybe' }, /VALIDATE_RESPONSES must be true or false/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ MODEL_CATALOG: '{"not":"an array"}' }, /MODEL_CATALOG is invalid/],
    [{ MODEL_CATALOG: '[{"model":"m","provider":"local","credits_per_image":-1}]' }, /credits_per_image/],
    [{ MODEL_CATALOG: '[{"model":"m","provider":"elsewhere","credits_per_image":1}]' }, /not configured/],
    [{ VOLC_ACCESS_KEY_ID: 'AK' }, /set both VOLC_ACCESS_KEY_ID and VOLC_SECRET_ACCESS_KEY/],
    [{ ARK_API_KEY: 'k', ARK_BASE_URL: 'ftp://x' }, /ARK_BASE_URL must be an http\(s\) URL/],
    [{ RATE_LIMIT_STORE: 'redis' }, /needs REDIS_URL/],
    [{ RATE_LIMIT_REDIS_FALLBACK: 'allow' }, /RATE_LIMIT_REDIS_FALLBACK must be one of refuse, sql/],
    [{ DB_STATEMENT_TIMEOUT_MS: '0' }, /DB_STATEMENT_TIMEOUT_MS must be an integer/],
    [{ CF_ACCESS_CLIENT_ID: 'a,b', CF_ACCESS_CLIENT_SECRET: 'only-one-secret-here' }, /same number of values/],
  ])('fails fast with a clear message for %j', (env, message) => {
    expect(() => loadConfig({ ADMIN_SECRET: 'a-long-enough-secret', DATABASE_URL: path.join(dir(), 'x.db'), ...env }, quiet)).toThrow(message);
  });

  it('reads a model catalog from MODEL_CATALOG', () => {
    const config = loadConfig(
      {
        ADMIN_SECRET: 'a-long-enough-secret',
        DATABASE_URL: path.join(dir(), 'x.db'),
        MODEL_CATALOG: '[{"model":"cheap","provider":"local","credits_per_image":0,"default_size":"64x64"}]',
      },
      quiet,
    );
    expect(config.catalog).toEqual([{ model: 'cheap', provider: 'local', upstream_model: 'cheap', credits_per_image: 0, default_size: '64x64' }]);
  });
});
