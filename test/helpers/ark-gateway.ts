import { type FakeImagesApi, startFakeImagesApi } from '../fakes/fake-images-api';
import { type TestGateway, startTestGateway } from './test-gateway';

export interface ArkGateway {
  /** The gateway; its close() lets every held call go, closes the gateway, then the fake Ark API. */
  t: TestGateway;
  ark: FakeImagesApi;
}

/**
 * A fake Ark API (account key `apiKey`) and an in-process gateway whose jimeng provider calls it;
 * `env` adds to the gateway's settings. One close() ends both.
 */
export async function startArkGateway({ apiKey = 'k', env = {} }: { apiKey?: string; env?: Record<string, string> } = {}): Promise<ArkGateway> {
  const ark = await startFakeImagesApi({ apiKey, flavour: 'ark' });
  let gateway: TestGateway;
  try {
    gateway = await startTestGateway({ ARK_API_KEY: apiKey, ARK_BASE_URL: ark.url, ...env });
  } catch (error) {
    await ark.close();
    throw error;
  }
  const t: TestGateway = {
    ...gateway,
    async close() {
      ark.releaseHeld();
      await gateway.close();
      await ark.close();
    },
  };
  return { t, ark };
}
