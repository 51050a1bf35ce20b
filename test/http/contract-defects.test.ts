import request from 'supertest';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { ADMIN_SECRET, SERVICE_TOKEN, type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';

/**
 * Each example of issue #12 that tools we did not write found (fuzzer, Prism, a new user with
 * curl), as a regression test, on SQLite and on PostgreSQL + Redis.
 */
describe('issue #12 examples: classes of contract defects', () => {
  let t: TestGateway;
  let keyId: string;
  const admin = { Authorization: `Bearer ${ADMIN_SECRET}` };
  beforeAll(async () => {
    t = await startTestGateway();
    keyId = (await t.createKey({ owner: 'a@b.com' })).id;
  });
  afterAll(() => t.close());

  describe('integers in the query: decimal literals within bounds only', () => {
    it.each(['Infinity', '0x10', '1e3', '9'.repeat(300), '-1', '', '1.0', ' 1'])('GET /admin/keys?limit=%s is 400 naming limit', async (value) => {
      const res = await t.api.send('get', `/admin/keys?limit=${encodeURIComponent(value)}`, { headers: admin });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'limit' });
    });

    it('300 digits on the internal API is 400, not 500', async () => {
      const res = await t.internal.service('get', `/api/v1/creative/generations?limit=${'9'.repeat(300)}`);
      expect(res.status).toBe(400);
      expect(res.body.error.param).toBe('limit');
    });
  });

  describe('date-times: one RFC 3339 parser everywhere', () => {
    it('GET /api/v1/creative/usage with to at a leap second answers 200 (was 500)', async () => {
      const res = await t.internal.service('get', '/api/v1/creative/usage?from=2030-06-01T00:00:00Z&to=2030-06-30T23:59:60Z');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ from: '2030-06-01T00:00:00.000Z', to: '2030-07-01T00:00:00.000Z' });
    });

    it('lowercase t and z, offsets (with + sent as %2B or unencoded) and fractions parse in the query', async () => {
      for (const from of ['2030-01-01t00:00:00z', '2030-01-01T01:00:00.123456%2B01:00', '2030-01-01T01:00:00+01:00', '2029-12-31T19:00:00-05:00']) {
        const res = await t.internal.service('get', `/api/v1/creative/usage?from=${from}&to=2030-02-01T00:00:00Z`);
        expect({ from, status: res.status }).toEqual({ from, status: 200 });
        expect(res.body.from).toMatch(/^2030-01-01T00:00:00\.(000|123)Z$/);
      }
    });

    it('calendar-invalid date-times are 400, never shifted: expires_at on create and update, created_after, usage', async () => {
      const create = await t.api.admin('post', '/admin/keys', {
        name: 'n',
        owner: 'o',
        credits_quota: 1,
        quota_period_days: 1,
        allowed_providers: ['local'],
        expires_at: '2030-02-30T00:00:00Z',
      });
      expect(create.status).toBe(400);
      expect(create.body.error.param).toBe('expires_at');
      const update = await t.api.admin('patch', `/admin/keys/${keyId}`, { expires_at: '2030-02-30T00:00:00Z' });
      expect(update.status).toBe(400);
      expect(update.body.error.param).toBe('expires_at');
      const list = await t.internal.service('get', '/api/v1/creative/generations?created_after=2030-02-30T00:00:00Z');
      expect(list.status).toBe(400);
      expect(list.body.error.param).toBe('created_after');
      const usage = await t.internal.service('get', '/api/v1/creative/usage?from=2030-02-30T00:00:00Z&to=2030-03-31T00:00:00Z');
      expect(usage.status).toBe(400);
      expect(usage.body.error.param).toBe('from');
    });

    it('PATCH /admin/keys/{id} with a future expires_at at a leap second is accepted (was "must be in the future")', async () => {
      const res = await t.api.admin('patch', `/admin/keys/${keyId}`, { expires_at: '2030-06-30T23:59:60Z' });
      expect(res.status).toBe(200);
      expect(res.body.expires_at).toBe('2030-07-01T00:00:00.000Z');
      const created = await t.api.admin('post', '/admin/keys', {
        name: 'n',
        owner: 'o',
        credits_quota: 1,
        quota_period_days: 1,
        allowed_providers: ['local'],
        expires_at: '2031-12-31t23:59:60.250z',
      });
      expect(created.status).toBe(201);
      expect(created.body.expires_at).toBe('2032-01-01T00:00:00.250Z');
    });
  });

  describe('NUL characters: 400 on every engine', () => {
    it('createKey owner, PATCH name, listKeys?owner=%00 and internal generations?model=a%00b are 400 naming the field', async () => {
      const create = await t.api.admin('post', '/admin/keys', {
        name: 'n',
        owner: 'a\u0000b',
        credits_quota: 1,
        quota_period_days: 1,
        allowed_providers: ['local'],
      });
      expect(create.status).toBe(400);
      expect(create.body.error).toMatchObject({ code: 'invalid_request', param: 'owner' });
      const patch = await t.api.admin('patch', `/admin/keys/${keyId}`, { name: '\u0000' });
      expect(patch.status).toBe(400);
      expect(patch.body.error.param).toBe('name');
      const list = await t.api.send('get', '/admin/keys?owner=%00', { headers: admin });
      expect(list.status).toBe(400);
      expect(list.body.error.param).toBe('owner');
      const generations = await t.internal.service('get', '/api/v1/creative/generations?model=a%00b');
      expect(generations.status).toBe(400);
      expect(generations.body.error.param).toBe('model');
      const member = await t.api.admin('post', '/admin/keys', {
        name: 'n',
        owner: 'o',
        credits_quota: 1,
        quota_period_days: 1,
        allowed_providers: ['loc\u0000al'],
      });
      expect(member.status).toBe(400);
      expect(member.body.error.param).toBe('allowed_providers[0]');
    });
  });

  describe('JSON nesting is bounded at parse time', () => {
    const deep = `{"prompt":"p","model":"local-1","user":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    it('5,000 nested arrays with an Idempotency-Key are 400 (was a stack overflow, 500), and never charged without one', async () => {
      const { key, id } = await t.createKey();
      for (const headers of [{ 'Idempotency-Key': 'deep-1' }, {}] as Array<Record<string, string>>) {
        const res = await t.api.send('post', '/v1/images/generations', {
          headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...headers },
          rawBody: deep,
        });
        expect(res.status).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
        expect(res.body.error.message).toMatch(/nested deeper than 32/);
      }
      expect(await t.api.creditsUsed(id)).toBe(0);
      // Brackets inside strings are not nesting.
      const inString = await t.api.client(key, { ...localRequest(), prompt: '['.repeat(100) });
      expect(inString.status).toBe(200);
    });
  });

  describe('reserved characters in query values', () => {
    it('GET /admin/keys?owner=a@b.com sent unencoded (as curl does) is 200 (was "must be url encoded")', async () => {
      const res = await request(t.gateway.url).get('/admin/keys?owner=a@b.com').set(admin);
      expect(res.status).toBe(200);
      expect(res.body.data.map((k: { id: string }) => k.id)).toContain(keyId);
      for (const owner of ['x:y', 'a/b', 'a@b:c/d']) {
        const other = await request(t.gateway.url).get(`/admin/keys?owner=${owner}`).set(admin);
        expect({ owner, status: other.status }).toEqual({ owner, status: 200 });
      }
      const usage = await request(t.gateway.internalUrl).get('/api/v1/creative/usage?from=2030-01-01T00:00:00Z&to=2030-01-02T00:00:00Z').set(SERVICE_TOKEN);
      expect(usage.status).toBe(200);
    });
  });

  describe('idempotency compares JSON values, not bytes', () => {
    it('a retry of POST /admin/keys with the same members in another order replays the first response (was 422)', async () => {
      const headers = { ...admin, 'Idempotency-Key': 'reordered-1', 'Content-Type': 'application/json' };
      const first = await t.api.send('post', '/admin/keys', {
        headers,
        rawBody: '{"name":"r","owner":"o","credits_quota":1,"quota_period_days":1,"allowed_providers":["local"]}',
      });
      expect(first.status).toBe(201);
      const retry = await t.api.send('post', '/admin/keys', {
        headers,
        rawBody: '{ "allowed_providers": ["local"], "quota_period_days": 1,\n "credits_quota": 1.0, "owner": "\\u006f", "name": "r" }',
      });
      expect(retry.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.body.id).toBe(first.body.id);
      const other = await t.api.send('post', '/admin/keys', {
        headers,
        rawBody: '{"name":"r","owner":"o","credits_quota":2,"quota_period_days":1,"allowed_providers":["local"]}',
      });
      expect(other.status).toBe(422);
    });
  });

  describe('headers: declared on every response that carries them', () => {
    it('Retry-After: not sent for an unconfigured provider, and not required by the spec there', async () => {
      const { key } = await t.createKey({ allowed_providers: ['jimeng'] });
      const res = await t.api.client(key, { prompt: 'p', model: 'jimeng-4.5' });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('provider_unavailable');
      expect(res.headers['retry-after']).toBeUndefined();
      const document = loadOpenApiDocument('gateway') as unknown as { components: { headers: Record<string, { required?: boolean }> } };
      expect(document.components.headers.RetryAfterWhenTransient?.required).toBe(false);
    });

    it('the served documents declare X-Request-Id on every response, rate-limit headers on client errors, Idempotent-Replayed on replayable outcomes', async () => {
      for (const url of [`${t.gateway.url}/openapi.json`, `${t.gateway.internalUrl}/api/v1/creative/openapi.json`]) {
        const document = (await request(url).get('').set(SERVICE_TOKEN)).body as {
          paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
          components: Record<string, Record<string, unknown>>;
        };
        const resolve = (node: unknown): Record<string, unknown> => {
          const ref = (node as { $ref?: string }).$ref;
          return ref
            ? resolve(
                ref
                  .slice(2)
                  .split('/')
                  .reduce<unknown>((at, part) => (at as Record<string, unknown>)[part], document),
              )
            : (node as Record<string, unknown>);
        };
        for (const [path, item] of Object.entries(document.paths)) {
          for (const [method, operation] of Object.entries(item).filter(([m]) => m !== 'parameters')) {
            for (const [status, response] of Object.entries(operation.responses)) {
              const headers = (resolve(response).headers ?? {}) as Record<string, unknown>;
              expect({ at: `${method} ${path} ${status}`, requestId: 'X-Request-Id' in headers }).toEqual({
                at: `${method} ${path} ${status}`,
                requestId: true,
              });
            }
          }
        }
      }
      const gateway = (await request(t.gateway.url).get('/openapi.json')).body as {
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      };
      const headersOf = (response: unknown): string[] => {
        const ref = (response as { $ref?: string }).$ref;
        const named = ref
          ? ref
              .slice(2)
              .split('/')
              .reduce<unknown>((at, part) => (at as Record<string, unknown>)[part], gateway)
          : response;
        return Object.keys((named as { headers?: Record<string, unknown> }).headers ?? {});
      };
      const generate = gateway.paths['/images/generate']!.post!.responses;
      expect(headersOf(generate['400'])).toEqual(expect.arrayContaining(['RateLimit', 'RateLimit-Policy', 'X-RateLimit-Remaining', 'Idempotent-Replayed']));
      expect(headersOf(generate['401'])).not.toContain('RateLimit');
    });

    it('X-Request-Id: a conforming value is echoed, any other is replaced', async () => {
      const kept = await request(t.gateway.url).get('/healthz').set('X-Request-Id', 'trace.1:abc-DEF_2');
      expect(kept.headers['x-request-id']).toBe('trace.1:abc-DEF_2');
      for (const odd of ['has space', 'x'.repeat(129), 'émoji']) {
        const replaced = await request(t.gateway.url).get('/admin/keys/nope').set('X-Request-Id', encodeURI(odd).replace(/%20/g, ' '));
        expect(replaced.headers['x-request-id']).toMatch(/^req_[0-9A-Za-z]{22}$/);
        expect(replaced.body.error.request_id).toBe(replaced.headers['x-request-id']);
      }
    });
  });

  describe('servers give generators an absolute base URL', () => {
    it('each served document has a server URL whose variables default to the origin it was fetched from', async () => {
      for (const url of [`${t.gateway.url}/openapi.json`, `${t.gateway.internalUrl}/api/v1/creative/openapi.json`]) {
        const { servers, info } = (await request(url).get('').set(SERVICE_TOKEN)).body as {
          servers: Array<{ url: string; variables: Record<string, { default: string }> }>;
          info: { contact?: { url?: string }; license?: { url?: string } };
        };
        const server = servers[0]!;
        const resolved = server.url.replace(/\{(\w+)\}/g, (_m, name: string) => server.variables[name]!.default);
        expect(resolved).toBe(new URL(url).origin);
        expect(info.contact?.url).toMatch(/^https:\/\//);
        expect(info.license?.url).toMatch(/^https:\/\//);
      }
    });
  });
});
