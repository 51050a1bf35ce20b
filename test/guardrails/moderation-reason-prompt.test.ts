import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { askModerationHook } from '../../src/guardrails/moderation-hook';
import { generateWebhookSecret } from '../../src/webhooks/signing';
import { selfSigned } from '../helpers/self-signed-tls';

/**
 * A moderation hook's `reason` is outside text the gateway records on the generation and answers to
 * the client: a reason that quotes the prompt (re-wrapped, or deep in a long reason) is kept as
 * `[prompt]`, before it is cut to its 1000 characters, and without control characters.
 */
describe("a moderation hook's reason keeps no prompt", () => {
  const tls = selfSigned();
  const prompt = Array.from({ length: 60 }, (_, i) => `zqh${i}`).join(' ');
  let reason = '';
  let server: https.Server;
  let base: string;

  beforeAll(async () => {
    server = https.createServer(tls, (req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ decision: 'allow', reason })));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const ask = () =>
    askModerationHook(
      { url: `${base}/moderate`, secrets: [generateWebhookSecret()], timeoutMs: 5000, failureMode: 'fail_closed' },
      { prompt, inputImages: [], model: 'local-1', keyId: 'key_1', projectId: 'prj_1' },
      { allowPrivateNetworks: true, ca: tls.cert },
    );

  it('a quote of the prompt, re-wrapped, is [prompt]; control characters go', async () => {
    reason = `fine:\n"${prompt.replace(/ /g, '\r\n ')}"\u001b[31m`;
    const outcome = await ask();
    expect(outcome).toMatchObject({ decision: 'allow', reason: 'fine: "[prompt]" [31m' });
  });

  it('a quote that starts before the 1000th character and runs past it leaves no piece of the prompt', async () => {
    reason = `${'ok '.repeat(320)}${prompt}`;
    const outcome = await ask();
    expect(outcome.reason).toMatch(/\[prompt\]$/);
    expect(outcome.reason).not.toMatch(/zqh\d/);
    expect(outcome.reason!.length).toBeLessThanOrEqual(1000);
  });
});
