import { startFakeBfl } from './fake-bfl';
import { startFakeFal } from './fake-fal';
import { startFakeGemini } from './fake-gemini';
import { startFakeImagesApi } from './fake-images-api';
import { startFakeOpenAIImages } from './fake-openai-images';
import { startFakeVisual } from './fake-volc-visual';

/** A fake upstream started for one wire format, and how a gateway's environment account reaches it. */
export interface RunningFormatFake {
  /** The environment variables of an account pointed at the fake (and any catalog additions it needs). */
  env: Record<string, string>;
  /** The provider name a key must allow. */
  provider: string;
  /** A catalog model served over the format, and a size it takes. */
  model: string;
  size: string;
  close(): Promise<void>;
}

/**
 * Every registered wire format that calls an upstream has a fake here, speaking the upstream's real
 * wire format (test/conformance/provider-formats.test.ts fails for a format without one).
 */
export const FORMAT_FAKES: Readonly<Record<string, () => Promise<RunningFormatFake>>> = {
  visual: async () => {
    const credentials = { accessKeyId: 'AKformat', secretAccessKey: 'format-secret' };
    const fake = await startFakeVisual(credentials);
    return {
      env: {
        VOLC_ACCESS_KEY_ID: credentials.accessKeyId,
        VOLC_SECRET_ACCESS_KEY: credentials.secretAccessKey,
        VOLC_VISUAL_ENDPOINT: fake.url,
        UPSTREAM_POLL_INTERVAL_MS: '5',
      },
      provider: 'jimeng',
      model: 'jimeng-4.0',
      size: '2048x2048',
      close: () => fake.close(),
    };
  },
  ark: async () => {
    const fake = await startFakeImagesApi({ apiKey: 'ark-format-key', flavour: 'ark' });
    return {
      env: { ARK_API_KEY: 'ark-format-key', ARK_BASE_URL: `${fake.url}/api/v3` },
      provider: 'jimeng',
      model: 'jimeng-4.5',
      size: '2048x2048',
      close: () => fake.close(),
    };
  },
  'images-api': async () => {
    const fake = await startFakeImagesApi({ apiKey: 'sk-format', flavour: 'openai' });
    return {
      env: {
        OPENAI_COMPAT_BASE_URL: `${fake.url}/v1`,
        OPENAI_COMPAT_API_KEY: 'sk-format',
        OPENAI_COMPAT_PROVIDER_NAME: 'selfhosted',
        MODEL_CATALOG: JSON.stringify({
          models: [{ model: 'selfhosted-1', provider: 'selfhosted', upstream_model: 'flux-dev', credits_per_image: 2, default_size: '1024x1024' }],
        }),
      },
      provider: 'selfhosted',
      model: 'selfhosted-1',
      size: '1024x1024',
      close: () => fake.close(),
    };
  },
  bfl: async () => {
    const fake = await startFakeBfl({ apiKey: 'bfl-format-key' });
    return {
      env: { BFL_API_KEY: 'bfl-format-key', BFL_BASE_URL: fake.url, UPSTREAM_POLL_INTERVAL_MS: '5' },
      provider: 'bfl',
      model: 'flux-pro-1.1',
      size: '1024x768',
      close: () => fake.close(),
    };
  },
  fal: async () => {
    const fake = await startFakeFal({ apiKey: 'fal-format:key' });
    return {
      env: { FAL_KEY: 'fal-format:key', FAL_BASE_URL: fake.url, UPSTREAM_POLL_INTERVAL_MS: '5' },
      provider: 'fal',
      model: 'fal-flux-dev',
      size: '1024x768',
      close: () => fake.close(),
    };
  },
  openai: async () => {
    const fake = await startFakeOpenAIImages({ apiKey: 'sk-format-openai' });
    return {
      env: { OPENAI_API_KEY: 'sk-format-openai', OPENAI_BASE_URL: `${fake.url}/v1` },
      provider: 'openai',
      model: 'gpt-image-1-mini',
      size: '1024x1024',
      close: () => fake.close(),
    };
  },
  gemini: async () => {
    const fake = await startFakeGemini({ apiKey: 'gemini-format-key' });
    return {
      env: { GEMINI_API_KEY: 'gemini-format-key', GEMINI_BASE_URL: fake.url },
      provider: 'google',
      model: 'gemini-2.5-flash-image',
      size: '1344x768',
      close: () => fake.close(),
    };
  },
};
