// `npm run fake-upstreams`: the fake Volcengine visual API and Ark on fixed local ports, so the
// jimeng path can be tried without credentials. Prints the environment for `npm start`.
import { startFakeImagesApi } from './fake-images-api';
import { startFakeVisual } from './fake-volc-visual';

async function main(): Promise<void> {
  const credentials = { accessKeyId: 'AKfake', secretAccessKey: 'fake-secret' };
  const visual = await startFakeVisual(credentials, Number(process.env.FAKE_VISUAL_PORT ?? 9101));
  const ark = await startFakeImagesApi({ apiKey: 'fake-ark-key', flavour: 'ark' }, Number(process.env.FAKE_ARK_PORT ?? 9102));
  console.log(`Fake upstreams running. Start the gateway with:

  VOLC_ACCESS_KEY_ID=${credentials.accessKeyId} VOLC_SECRET_ACCESS_KEY=${credentials.secretAccessKey} \\
  VOLC_VISUAL_ENDPOINT=${visual.url} VOLC_POLL_INTERVAL_MS=200 \\
  ARK_API_KEY=fake-ark-key ARK_BASE_URL=${ark.url} npm start

Prompts may carry scenario tokens: [code:50411] [post-code:50511] [busy:2] [pending:3] [slow:5000] [garbage].`);
}

void main();
