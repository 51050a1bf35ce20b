import { freePort } from '../helpers/throwaway-servers';
import { type TestGateway, startTestGateway } from '../helpers/test-gateway';
import { type TestS3, startTestS3 } from '../helpers/test-s3';
import { until } from '../helpers/until';

/**
 * An S3 image store that does not serve is seen at startup and by /readyz, not first by a client's
 * generation. Liveness (/healthz) is the process only: a sick bucket must not get replicas restarted.
 */
describe('readiness of an S3 image store', () => {
  let s3: TestS3;
  let t: TestGateway | undefined;
  beforeAll(async () => {
    s3 = await startTestS3();
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });
  afterAll(async () => {
    await s3.close();
  });

  const notReady = async (gateway: TestGateway) => {
    for (const api of [gateway.api, gateway.internal]) {
      const readyz = await api.send('get', '/readyz');
      expect([readyz.status, readyz.body.error.code, readyz.body.error.dependency, readyz.body.error.message]).toEqual([
        503,
        'not_ready',
        'image_store',
        'The S3 image store does not answer.',
      ]);
      expect((await api.send('get', '/healthz')).status).toBe(200);
    }
  };

  it('serving: /readyz 200, nothing reported at startup', async () => {
    const gateway = await startTestGateway(s3.env);
    t = gateway;
    // The first probe loads the S3 client and opens a connection: on a loaded machine it may outlast the
    // probe's deadline once (503 then, as a load balancer would see it); serving means 200 after that.
    await until(async () => (await gateway.api.send('get', '/readyz')).status === 200, 'the public /readyz to answer 200');
    expect((await gateway.internal.send('get', '/readyz')).status).toBe(200);
    expect(gateway.logs.filter((line) => line.includes('image store does not answer'))).toEqual([]);
  });

  it('an endpoint nothing listens on: one warning at startup, /readyz 503 naming image_store, /healthz 200', async () => {
    const closed = await freePort();
    t = await startTestGateway({ ...s3.env, IMAGE_S3_ENDPOINT: `http://127.0.0.1:${closed}` });
    const warnings = t.logs.filter((line) => line.includes('image store does not answer')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, dependency: 'image_store', image_store: `s3 http://127.0.0.1:${closed}/${s3.bucket}/images/` });
    await notReady(t);
  });

  it('a bucket that does not exist: /readyz 503 naming image_store', async () => {
    t = await startTestGateway({ ...s3.env, IMAGE_S3_BUCKET: 'no-such-bucket' });
    await notReady(t);
  });
});
