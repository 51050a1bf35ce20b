import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/config/config';

const base = () => ({ DATABASE_URL: path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-config-')), 'gw.db'), ADMIN_SECRET: 'admin-secret-0123456789' });
const quiet = () => undefined;

describe('configuration: Cloudflare Access JWTs', () => {
  it('off unless CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD are set', () => {
    expect(loadConfig(base(), quiet).accessJwt).toBeUndefined();
  });

  it('the team domain becomes the issuer and the JWKS URL; several AUD tags are allowed', () => {
    for (const domain of ['myteam.cloudflareaccess.com', 'https://myteam.cloudflareaccess.com/']) {
      expect(loadConfig({ ...base(), CF_ACCESS_TEAM_DOMAIN: domain, CF_ACCESS_AUD: 'aud1, aud2' }, quiet).accessJwt).toEqual({
        issuer: 'https://myteam.cloudflareaccess.com',
        audiences: ['aud1', 'aud2'],
        jwksUrl: 'https://myteam.cloudflareaccess.com/cdn-cgi/access/certs',
        adminScopes: [],
        adminAudiences: ['aud1', 'aud2'],
      });
    }
    const local = loadConfig(
      { ...base(), CF_ACCESS_TEAM_DOMAIN: 'myteam.cloudflareaccess.com', CF_ACCESS_AUD: 'a', CF_ACCESS_JWKS_URL: 'http://127.0.0.1:9/certs' },
      quiet,
    );
    expect(local.accessJwt?.jwksUrl).toBe('http://127.0.0.1:9/certs');
  });

  it('CF_ACCESS_ADMIN_SCOPES grants Access JWTs admin scopes, for CF_ACCESS_ADMIN_AUD (default CF_ACCESS_AUD)', () => {
    const team = { CF_ACCESS_TEAM_DOMAIN: 'myteam.cloudflareaccess.com', CF_ACCESS_AUD: 'internal' };
    const own = loadConfig({ ...base(), ...team, CF_ACCESS_ADMIN_SCOPES: 'keys:read, usage:read', CF_ACCESS_ADMIN_AUD: 'console1,console2' }, quiet).accessJwt;
    expect([own?.adminScopes, own?.adminAudiences]).toEqual([
      ['keys:read', 'usage:read'],
      ['console1', 'console2'],
    ]);
    expect(loadConfig({ ...base(), ...team, CF_ACCESS_ADMIN_SCOPES: 'keys:read' }, quiet).accessJwt?.adminAudiences).toEqual(['internal']);
    expect(() => loadConfig({ ...base(), ...team, CF_ACCESS_ADMIN_SCOPES: 'keys:read,keys:everything' }, quiet)).toThrow(
      /"keys:everything" is not an admin scope/,
    );
    expect(() => loadConfig({ ...base(), ...team, CF_ACCESS_ADMIN_SCOPES: 'keys:read', CF_ACCESS_ADMIN_AUD: ' , ' }, quiet)).toThrow(
      /CF_ACCESS_ADMIN_AUD must name/,
    );
    expect(() => loadConfig({ ...base(), CF_ACCESS_ADMIN_SCOPES: 'keys:read' }, quiet)).toThrow(/CF_ACCESS_ADMIN_SCOPES needs CF_ACCESS_TEAM_DOMAIN/);
  });

  it.each([
    [{ CF_ACCESS_TEAM_DOMAIN: 'myteam.cloudflareaccess.com' }, /set both CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD/],
    [{ CF_ACCESS_AUD: 'a' }, /set both CF_ACCESS_TEAM_DOMAIN and CF_ACCESS_AUD/],
    [{ CF_ACCESS_TEAM_DOMAIN: 'not a host', CF_ACCESS_AUD: 'a' }, /CF_ACCESS_TEAM_DOMAIN must be a host name/],
    [{ CF_ACCESS_TEAM_DOMAIN: 't.cloudflareaccess.com', CF_ACCESS_AUD: ' , ' }, /CF_ACCESS_AUD must name at least one/],
    [{ CF_ACCESS_TEAM_DOMAIN: 't.cloudflareaccess.com', CF_ACCESS_AUD: 'a', CF_ACCESS_JWKS_URL: 'ftp://x' }, /CF_ACCESS_JWKS_URL must be an http\(s\) URL/],
  ])('refuses %j', (env, message) => {
    expect(() => loadConfig({ ...base(), ...env }, quiet)).toThrow(ConfigError);
    expect(() => loadConfig({ ...base(), ...env }, quiet)).toThrow(message);
  });
});
