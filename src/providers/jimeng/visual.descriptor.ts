import { declareVariable, httpUrl, text } from '../../config/env-types';
import { credentialsOf, type ProviderDescriptor } from '../descriptor';
import { VISUAL_ERRORS } from './visual-errors';
import { VisualTransport } from './visual-transport';
import { VISUAL_MODELS } from './visual-models';

/** Volcengine's visual API (CVSync2AsyncSubmitTask / GetResult): Jimeng req_keys, one task per image. */
export const VISUAL: ProviderDescriptor = {
  format: 'visual',
  title: "Volcengine's visual API (Jimeng req_keys; signed with an access key pair)",
  providers: ['jimeng'],
  credentials: {
    fields: [
      { name: 'access_key_id', secret: false },
      { name: 'secret_access_key', secret: true },
    ],
    hintField: 'access_key_id',
  },
  environment: {
    credentials: { access_key_id: 'VOLC_ACCESS_KEY_ID', secret_access_key: 'VOLC_SECRET_ACCESS_KEY' },
    baseUrl: 'VOLC_VISUAL_ENDPOINT',
    channelId: 'chn_envJimengVisual',
    variables: {
      VOLC_ACCESS_KEY_ID: declareVariable(text.optional(), {
        description: 'access key id of the Volcengine visual API (jimeng, transport `visual`), with `VOLC_SECRET_ACCESS_KEY`',
        defaultText: 'none',
      }),
      VOLC_SECRET_ACCESS_KEY: declareVariable(text.optional(), {
        description: 'secret access key of the Volcengine visual API, with `VOLC_ACCESS_KEY_ID`',
        secret: true,
        field: 'providers.accounts.*.credentials.secret_access_key',
        defaultText: 'none',
      }),
      VOLC_VISUAL_ENDPOINT: declareVariable(httpUrl.default('https://visual.volcengineapi.com'), { description: 'base URL of the Volcengine visual API' }),
    },
  },
  defaultBaseUrl: 'https://visual.volcengineapi.com',
  calls: 'one-per-image',
  // Results (return_url) are served from p<N>-aiop-sign.byteimg.com.
  resultHosts: ['*.byteimg.com'],
  models: VISUAL_MODELS,
  catalog: [
    { model: 'jimeng-4.0', provider: 'jimeng', transport: 'visual', upstream_model: 'jimeng_t2i_v40', credits_per_image: 3, default_size: '2048x2048' },
    { model: 'jimeng-3.1', provider: 'jimeng', transport: 'visual', upstream_model: 'jimeng_t2i_v31', credits_per_image: 2, default_size: '1328x1328' },
  ],
  modelIds: /^jimeng_/,
  errors: VISUAL_ERRORS,
  // GetResult answers `not_found` for a task older than 12 hours ("任务已过期(12小时)").
  resume: { holds: 'the task_id', lifeMs: 12 * 3_600_000 },
  createClient(account, settings) {
    const credentials = credentialsOf(account, VISUAL);
    return new VisualTransport({
      endpoint: account.baseUrl as string,
      credentials: { accessKeyId: credentials.access_key_id as string, secretAccessKey: credentials.secret_access_key as string },
      pollIntervalMs: settings.pollIntervalMs,
      publicOnly: settings.publicOnly,
    });
  },
};
