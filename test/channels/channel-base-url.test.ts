import dns from 'node:dns';
import os from 'node:os';
import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type ThrowawayDatabase, createThrowawayDatabase } from '../helpers/test-database';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { isBlockedAddress } from '../../src/shared/safe-url';

/**
 * Issue #29 §4: a token that may write channels must not be able to send a channel's stored key to a
 * host of its choosing (PATCH base_url without credentials), nor point a channel at internal services
 * (loopback, private, link-local metadata) and read them through testChannel.
 */
const KEY = 'ark-base-url-key-0001';
const ATTACKER_KEY = 'attacker-does-not-know-0002';

const arkBody = (baseUrl: string) => ({
  name: 'ark',
  provider: 'jimeng',
  transport: 'ark',
  base_url: baseUrl,
  models: [{ model: 'jimeng-4.5' }],
  credentials: { api_key: KEY },
});

describe('channel base_url: changing it needs the credentials again', () => {
  let account: FakeImagesApi;
  let attacker: FakeImagesApi;
  let t: TestGateway;

  beforeAll(async () => {
    account = await startFakeImagesApi({ apiKey: KEY, flavour: 'ark' });
    attacker = await startFakeImagesApi({ apiKey: ATTACKER_KEY, flavour: 'ark' });
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t.close();
    await account.close();
    await attacker.close();
  });

  it('refuses a new base_url without credentials (400, param credentials): the key never reaches the new host', async () => {
    const created = await t.api.admin('post', '/admin/channels', arkBody(account.url));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const moved = await t.api.admin('patch', `/admin/channels/${id}`, { base_url: `${attacker.url}/v1` });
    expect(moved.status).toBe(400);
    expect(moved.body.error).toMatchObject({ code: 'invalid_request', param: 'credentials' });
    expect((await t.api.admin('get', `/admin/channels/${id}`)).body.base_url).toBe(account.url);
    const tested = await t.api.admin('post', `/admin/channels/${id}/test`);
    expect(tested.body.outcome).toBe('ok');
    expect(attacker.unauthorizedAt).toHaveLength(0);
    expect(attacker.counters.calls).toBe(0);
    // The same base_url again, or any other field, needs nothing more.
    expect((await t.api.admin('patch', `/admin/channels/${id}`, { base_url: account.url, weight: 2 })).status).toBe(200);
    // With the credentials in the same request the move is the operator's own.
    const withKey = await t.api.admin('patch', `/admin/channels/${id}`, { base_url: attacker.url, credentials: { api_key: ATTACKER_KEY } });
    expect(withKey.status).toBe(200);
    expect(withKey.body.base_url).toBe(attacker.url);
    expect((await t.api.admin('post', `/admin/channels/${id}/test`)).body.outcome).toBe('ok');
    expect(attacker.counters.calls).toBe(1);
  });
});

describe('channel base_url: no private upstreams by default (CHANNEL_ALLOW_PRIVATE_UPSTREAMS unset)', () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway({ CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'false' });
  });
  afterAll(() => t.close());

  const privateUrls = [
    'http://127.0.0.1:8080/v1',
    'http://169.254.169.254/latest',
    'http://10.1.2.3/api/v3',
    'http://192.168.0.10',
    'http://172.16.5.5:9000',
    'http://[::1]:8080',
    'http://[fd00:ec2::254]/latest',
    'http://localhost:9/v1',
    // Documentation ranges: reserved, refused as the other non-public ranges are.
    'http://192.0.2.10/v1',
    'http://198.51.100.7/api/v3',
    'http://203.0.113.10/api/v3',
    'http://[2001:db8::1]/v1',
  ];

  it.each(privateUrls)('createChannel refuses %s (400, param base_url)', async (url) => {
    const res = await t.api.admin('post', '/admin/channels', arkBody(url));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'base_url' });
  });

  it('refuses a host name that resolves to such an address now', async () => {
    const name = os.hostname();
    const addresses = await dns.promises.lookup(name, { all: true }).catch(() => []);
    // This machine's name resolves to a loopback or private address (127.0.0.1 in /etc/hosts here).
    if (!addresses.some((a) => isBlockedAddress(a.address))) return;
    const res = await t.api.admin('post', '/admin/channels', arkBody(`http://${name}:8080/v1`));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'base_url' });
    expect(res.body.error.message).toContain('resolves to');
  });

  it('updateChannel refuses them too, even with credentials; a public address is accepted', async () => {
    const created = await t.api.admin('post', '/admin/channels', arkBody('http://93.184.216.34/api/v3'));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    for (const url of ['http://169.254.169.254/latest', 'http://127.0.0.1:1']) {
      const res = await t.api.admin('patch', `/admin/channels/${id}`, { base_url: url, credentials: { api_key: KEY } });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'base_url' });
    }
    const moved = await t.api.admin('patch', `/admin/channels/${id}`, { base_url: 'http://1.1.1.1/api/v3', credentials: { api_key: KEY } });
    expect(moved.status).toBe(200);
    expect((await t.api.admin('get', `/admin/channels/${id}`)).body.base_url).toBe('http://1.1.1.1/api/v3');
  });
});

describe('channel base_url: checked again at every connection (a channel saved before, or a name re-pointed inside)', () => {
  let account: FakeImagesApi;
  let database: ThrowawayDatabase;
  let permissive: TestGateway;
  let strict: TestGateway;

  beforeAll(async () => {
    account = await startFakeImagesApi({ apiKey: KEY, flavour: 'ark' });
    database = await createThrowawayDatabase();
    const shared = { DATABASE_URL: database.url, CHANNEL_SEALING_KEY: 'b2'.repeat(32) };
    // One gateway saves the channels (private upstreams allowed), the other runs without the setting.
    permissive = await startTestGateway({ ...shared, CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'true' });
    strict = await startTestGateway({ ...shared, CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'false' });
  });
  afterAll(async () => {
    await strict.close();
    await permissive.close();
    await account.close();
    await database.drop();
  });

  it('a literal loopback address, or a name resolving there, is never connected to', async () => {
    const port = new URL(account.url).port;
    const urls = [account.url];
    const addresses = await dns.promises.lookup(os.hostname(), { all: true }).catch(() => []);
    if (addresses.length > 0 && addresses.every((a) => isBlockedAddress(a.address))) urls.push(`http://${os.hostname()}:${port}`);
    for (const url of urls) {
      const created = await permissive.api.admin('post', '/admin/channels', arkBody(url));
      expect(created.status).toBe(201);
      const before = account.counters.calls;
      const tested = await strict.api.admin('post', `/admin/channels/${created.body.id}/test`);
      expect(tested.body).toMatchObject({ outcome: 'failed', error_code: 'provider_error' });
      expect(tested.body.message).toContain('EBLOCKEDADDRESS');
      expect(account.counters.calls).toBe(before);
      // The same channel works where private upstreams are allowed.
      expect((await permissive.api.admin('post', `/admin/channels/${created.body.id}/test`)).body.outcome).toBe('ok');
      await permissive.api.admin('delete', `/admin/channels/${created.body.id}`);
    }
  });
});

describe('channel base_url: IPv6 spellings of blocked IPv4 addresses', () => {
  let t: TestGateway;

  beforeAll(async () => {
    t = await startTestGateway({ CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'false' });
  });
  afterAll(() => t.close());

  // IPv4-compatible (::/96), IPv4-translated (::ffff:0:0:0/96) and local-use NAT64 (64:ff9b:1::/48) forms.
  it.each([
    'http://[::127.0.0.1]/v1',
    'http://[::7f00:1]:8080',
    'http://[::ffff:0:127.0.0.1]/v1',
    'http://[::ffff:0:a9fe:a9fe]/latest',
    'http://[::10.0.0.1]',
    'http://[64:ff9b:1::a00:1]',
  ])('createChannel refuses %s (400, param base_url)', async (url) => {
    const res = await t.api.admin('post', '/admin/channels', arkBody(url));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'base_url' });
  });
});

describe('channel base_url: CHANNEL_ALLOW_PRIVATE_UPSTREAMS=true keeps metadata addresses out and relays nothing from private ones', () => {
  let account: FakeImagesApi;
  let t: TestGateway;

  beforeAll(async () => {
    account = await startFakeImagesApi({ apiKey: KEY, flavour: 'ark' });
    t = await startTestGateway({ CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'true' });
  });
  afterAll(async () => {
    await t.close();
    await account.close();
  });

  it.each([
    'http://169.254.169.254/latest',
    'http://[fd00:ec2::254]/latest',
    'http://[::ffff:169.254.169.254]/',
    'http://[::a9fe:a9fe]/',
    'http://100.100.100.200/latest',
    'http://[fe80::1]:8080',
    // IPv6 spellings of 100.100.100.200 (IPv4-mapped, -compatible, -translated, NAT64) and NAT64 itself.
    'http://[::ffff:100.100.100.200]/latest',
    'http://[::6464:64c8]/latest',
    'http://[::ffff:0:6464:64c8]/latest',
    'http://[64:ff9b::6464:64c8]/latest',
    'http://[64:ff9b::a00:1]/v1',
    'http://[64:ff9b:1::a00:1]/v1',
  ])('createChannel refuses %s all the same (400, param base_url)', async (url) => {
    const res = await t.api.admin('post', '/admin/channels', arkBody(url));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'base_url' });
    expect(res.body.error.message).toContain('metadata');
  });

  it('testChannel on a private upstream tells the outcome and code, never the answer it got', async () => {
    const created = await t.api.admin('post', '/admin/channels', arkBody(account.url));
    expect(created.status).toBe(201);
    account.setMode('failing');
    try {
      const tested = await t.api.admin('post', `/admin/channels/${created.body.id}/test`);
      expect(tested.status).toBe(200);
      expect(tested.body).toMatchObject({ outcome: 'failed', error_code: 'provider_error' });
      expect(account.counters.calls).toBeGreaterThan(0);
      expect(tested.body.message).not.toContain('fake outage');
      expect(tested.body.message).not.toContain('InternalServiceError');
      expect(tested.body.message).toContain('private address');
    } finally {
      account.setMode('normal');
    }
    expect((await t.api.admin('post', `/admin/channels/${created.body.id}/test`)).body).toMatchObject({ outcome: 'ok', message: null });
  });
});
