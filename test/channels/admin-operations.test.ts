import { bearer, createAdminTokenVia } from '../helpers/admin-tokens';
import { closedPort } from '../helpers/channels';
import { ADMIN_SECRET, type TestGateway, startTestGateway } from '../helpers/test-gateway';

/**
 * The channel admin operations, one describe per operation: success, the refusals of the operation,
 * and auth (no secret and a wrong one are 401; a token without the operation's scope is 403).
 * Routing, health and credentials are in channels.test.ts.
 */
describe('channel admin operations', () => {
  let t: TestGateway;
  let baseUrl: string;
  /** An admin token holding only keys:read, which no channel operation accepts. */
  let unscoped: Record<string, string>;
  beforeAll(async () => {
    t = await startTestGateway();
    baseUrl = `http://127.0.0.1:${await closedPort()}`;
    unscoped = bearer((await createAdminTokenVia(t.api, ['keys:read'])).token);
  });
  afterAll(() => t.close());

  const channel = (name: string) => ({
    name,
    provider: 'jimeng',
    transport: 'ark',
    base_url: baseUrl,
    models: [{ model: 'jimeng-4.5' }],
    credentials: { api_key: 'k' },
  });
  const send = (method: 'get' | 'post' | 'patch' | 'delete', path: string, headers: Record<string, string>, body?: unknown) =>
    t.api.send(method, path, { headers, body });
  const asAdmin = bearer(ADMIN_SECRET);

  /** 401 without credentials and with a wrong secret; 403 insufficient_scope for a token without the scope. */
  async function expectRefusedCredentials(method: 'get' | 'post' | 'patch' | 'delete', path: string, scope: string, body?: unknown): Promise<void> {
    const missing = await send(method, path, {}, body);
    expect([missing.status, missing.body.error.code]).toEqual([401, 'invalid_admin_secret']);
    const wrong = await send(method, path, bearer('not-the-admin-secret-0123456789'), body);
    expect([wrong.status, wrong.body.error.code]).toEqual([401, 'invalid_admin_secret']);
    const token = await send(method, path, unscoped, body);
    expect([token.status, token.body.error]).toEqual([403, expect.objectContaining({ code: 'insufficient_scope', scope })]);
  }

  describe('GET /admin/channels (listChannels)', () => {
    it('lists the channels, environment ones included; 400 for an unknown parameter', async () => {
      const list = await send('get', '/admin/channels', asAdmin);
      expect(list.status).toBe(200);
      expect(list.body.data.map((c: { id: string }) => c.id)).toContain('chn_envLocal');
      expect((await send('get', '/admin/channels?x=1', asAdmin)).status).toBe(400);
    });

    it('auth', () => expectRefusedCredentials('get', '/admin/channels', 'channels:read'));
  });

  describe('POST /admin/channels (createChannel)', () => {
    it('201; an Idempotency-Key replays the same body and is 422 with another', async () => {
      const headers = { ...asAdmin, 'Idempotency-Key': 'channel-1' };
      const created = await send('post', '/admin/channels', headers, channel('first'));
      expect(created.status).toBe(201);
      const replayed = await send('post', '/admin/channels', headers, channel('first'));
      expect([replayed.status, replayed.body.id, replayed.headers['idempotent-replayed']]).toEqual([201, created.body.id, 'true']);
      const reused = await send('post', '/admin/channels', headers, channel('second'));
      expect([reused.status, reused.body.error.code]).toEqual([422, 'idempotency_key_reused']);
    });

    it('auth', () => expectRefusedCredentials('post', '/admin/channels', 'channels:write', channel('refused')));
  });

  describe('GET /admin/channels/{id} (getChannel)', () => {
    it('200 with the channel, its credentials never shown; 404 for an unknown one', async () => {
      const { id } = (await send('post', '/admin/channels', asAdmin, channel('to read'))).body as { id: string };
      const read = await send('get', `/admin/channels/${id}`, asAdmin);
      expect([read.status, read.body.id, read.body.name]).toEqual([200, id, 'to read']);
      expect(JSON.stringify(read.body)).not.toContain('"api_key":"k"');
      expect((await send('get', '/admin/channels/chn_unknown0', asAdmin)).status).toBe(404);
    });

    it('auth', () => expectRefusedCredentials('get', '/admin/channels/chn_unknown0', 'channels:read'));
  });

  describe('PATCH /admin/channels/{id} (updateChannel)', () => {
    it('200 with the change; 409 for an environment channel; 404 for an unknown one', async () => {
      const { id } = (await send('post', '/admin/channels', asAdmin, channel('to rename'))).body as { id: string };
      const renamed = await send('patch', `/admin/channels/${id}`, asAdmin, { name: 'renamed' });
      expect([renamed.status, renamed.body.name]).toEqual([200, 'renamed']);
      expect((await send('patch', '/admin/channels/chn_envLocal', asAdmin, { name: 'x' })).status).toBe(409);
      expect((await send('patch', '/admin/channels/chn_unknown0', asAdmin, { name: 'x' })).status).toBe(404);
    });

    it('auth', () => expectRefusedCredentials('patch', '/admin/channels/chn_unknown0', 'channels:write', { name: 'x' }));
  });

  describe('DELETE /admin/channels/{id} (deleteChannel)', () => {
    it('204, then 404; 409 for an environment channel', async () => {
      const { id } = (await send('post', '/admin/channels', asAdmin, channel('to delete'))).body as { id: string };
      expect((await send('delete', `/admin/channels/${id}`, asAdmin)).status).toBe(204);
      expect((await send('delete', `/admin/channels/${id}`, asAdmin)).status).toBe(404);
      expect((await send('delete', '/admin/channels/chn_envLocal', asAdmin)).status).toBe(409);
    });

    it('auth', () => expectRefusedCredentials('delete', '/admin/channels/chn_unknown0', 'channels:write'));
  });
});
