import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { type TestGateway, localRequest, startTestGateway } from '../helpers/test-gateway';
import { until } from '../helpers/until';

/**
 * An S3 bucket that hangs (the endpoint accepts connections and never answers): every store
 * operation ends at IMAGE_STORE_TIMEOUT_MS, so a URL generation answers 503
 * `image_storage_unavailable` (nothing charged) instead of waiting as long as the bucket hangs, and
 * an asynchronous one fails the same way (docs/operators/dependencies.md).
 */
describe('a hung S3 image store', () => {
  let hung: net.Server;
  const sockets = new Set<net.Socket>();
  let t: TestGateway;
  beforeAll(async () => {
    hung = net.createServer((socket) => {
      // Reads what is sent, answers nothing.
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.resume();
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    t = await startTestGateway({
      IMAGE_STORE: 's3',
      IMAGE_S3_ENDPOINT: `http://127.0.0.1:${(hung.address() as AddressInfo).port}`,
      IMAGE_S3_BUCKET: 'gateway-images',
      IMAGE_S3_ACCESS_KEY_ID: 'hung-access-key',
      IMAGE_S3_SECRET_ACCESS_KEY: 'hung-secret-key',
      IMAGE_STORE_TIMEOUT_MS: '300',
    });
  });
  afterAll(async () => {
    await t.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => hung.close(() => resolve()));
  });

  it('a synchronous URL generation answers 503 image_storage_unavailable at the deadline, nothing charged; b64_json is served', async () => {
    const { id, key } = await t.createKey();
    const res = await t.api.client(key, localRequest({ response_format: 'url' }));
    expect([res.status, res.body.error?.code]).toEqual([503, 'image_storage_unavailable']);
    expect(await t.api.creditsUsed(id)).toBe(0);
    expect((await t.api.client(key, localRequest({ response_format: 'b64_json' }))).status).toBe(200);
    expect(await t.api.creditsUsed(id)).toBe(1);
  });

  it('an asynchronous URL generation fails with image_storage_unavailable, nothing charged', async () => {
    const { id, key } = await t.createKey();
    const accepted = await t.api.send('post', '/images/generate', {
      body: localRequest({ response_format: 'url' }),
      headers: { Authorization: `Bearer ${key}`, Prefer: 'respond-async' },
    });
    expect(accepted.status).toBe(202);
    const read = () => t.api.send('get', `/generations/${accepted.body.id}`, { headers: { Authorization: `Bearer ${key}` } });
    await until(async () => (await read()).body.status === 'failed', 'the generation failed');
    expect((await read()).body.error).toMatchObject({ code: 'image_storage_unavailable' });
    expect(await t.api.creditsUsed(id)).toBe(0);
  });
});
