import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { Webhook } from 'standardwebhooks';
import {
  type HookFailureMode,
  MAX_ANSWER_BYTES,
  type ModerationSubject,
  askModerationHook,
  moderationHookUrlProblem,
} from '../../src/guardrails/moderation-hook';
import { generateWebhookSecret } from '../../src/webhooks/signing';
import { selfSigned } from '../helpers/self-signed-tls';
import { freePort } from '../helpers/throwaway-servers';

/**
 * The moderation hook client (src/guardrails/moderation-hook.ts) against a real local https
 * endpoint: it verifies each call's Standard Webhooks signature with the `standardwebhooks` package
 * (as test/helpers/webhook-receiver.ts does for webhooks) and answers what each test scripts.
 */

type Script = { status: number; body?: string; headers?: Record<string, string> } | 'hold';

interface Received {
  path: string;
  body: string;
  /** The payload standardwebhooks' verify() returned under the endpoint's secret; undefined when it did not verify. */
  verified?: unknown;
}

describe('askModerationHook', () => {
  const tls = selfSigned();
  const secret = generateWebhookSecret();
  let verifyingSecret = secret;
  let server: https.Server;
  let base: string;
  let received: Received[] = [];
  let script: Script = { status: 200, body: '{"decision":"allow"}' };

  beforeAll(async () => {
    server = https.createServer(tls, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        const entry: Received = { path: req.url ?? '/', body };
        try {
          const headers = {
            'webhook-id': String(req.headers['webhook-id']),
            'webhook-timestamp': String(req.headers['webhook-timestamp']),
            'webhook-signature': String(req.headers['webhook-signature']),
          };
          entry.verified = new Webhook(verifyingSecret).verify(body, headers);
        } catch {
          // Recorded unverified.
        }
        received.push(entry);
        if (script === 'hold') return; // never answers
        res.writeHead(script.status, script.headers ?? {}).end(script.body ?? '');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  beforeEach(() => {
    received = [];
    verifyingSecret = secret;
    script = { status: 200, body: '{"decision":"allow"}' };
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const subject: ModerationSubject = {
    prompt: 'a lighthouse at dusk',
    inputImages: [{ sha256: 'a'.repeat(64) }, { sha256: 'b'.repeat(64), url: 'https://images.example.com/b.png?sig=1' }],
    model: 'flux-dev',
    keyId: 'key_123',
    projectId: 'prj_456',
  };
  const ask = (
    failureMode: HookFailureMode = 'fail_closed',
    options: { url?: string; allowPrivateNetworks?: boolean; timeoutMs?: number; secrets?: string[] } = {},
  ) =>
    askModerationHook(
      { url: options.url ?? `${base}/moderate`, secrets: options.secrets ?? [secret], timeoutMs: options.timeoutMs ?? 5000, failureMode },
      subject,
      {
        allowPrivateNetworks: options.allowPrivateNetworks ?? true,
        ca: tls.cert,
      },
    );

  it('POSTs the subject signed with the hook secret, and returns the allow decision', async () => {
    const outcome = await ask();
    expect(outcome).toEqual({ decision: 'allow', reason: null, latencyMs: expect.any(Number) });
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(0);
    expect(received).toHaveLength(1);
    expect(received[0]?.path).toBe('/moderate');
    expect(received[0]?.verified).toEqual({
      prompt: 'a lighthouse at dusk',
      input_images: [{ sha256: 'a'.repeat(64) }, { sha256: 'b'.repeat(64), url: 'https://images.example.com/b.png?sig=1' }],
      model: 'flux-dev',
      key_id: 'key_123',
      project_id: 'prj_456',
    });
  });

  it('is signed under the hook secret only: another secret does not verify it', async () => {
    verifyingSecret = generateWebhookSecret();
    await ask();
    expect(received).toHaveLength(1);
    expect(received[0]?.verified).toBeUndefined();
  });

  it("during a rotation's overlap, is signed with the new and the old secret: an endpoint holding either verifies it", async () => {
    const old = generateWebhookSecret();
    for (const holding of [secret, old]) {
      verifyingSecret = holding;
      await ask('fail_closed', { secrets: [secret, old] });
    }
    verifyingSecret = generateWebhookSecret();
    await ask('fail_closed', { secrets: [secret, old] });
    expect(received.map((entry) => entry.verified !== undefined)).toEqual([true, true, false]);
  });

  it("returns a block with the endpoint's reason, whatever the failure mode", async () => {
    script = { status: 200, body: JSON.stringify({ decision: 'block', reason: 'depicts a real person', extra: true }) };
    for (const mode of ['fail_open', 'fail_closed'] as const) {
      expect(await ask(mode)).toEqual({ decision: 'block', reason: 'depicts a real person', latencyMs: expect.any(Number) });
    }
  });

  it('fails open or closed when the endpoint does not answer before the deadline', async () => {
    script = 'hold';
    expect(await ask('fail_open', { timeoutMs: 300 })).toEqual({
      decision: 'allow',
      reason: null,
      latencyMs: expect.any(Number),
      failedOpen: true,
      failure: 'the hook did not answer within 300 ms',
    });
    expect(await ask('fail_closed', { timeoutMs: 300 })).toMatchObject({
      decision: 'block',
      failedOpen: false,
      failure: 'the hook did not answer within 300 ms',
    });
    expect(received).toHaveLength(2);
  });

  it('fails open or closed when nothing listens at the endpoint', async () => {
    const url = `https://127.0.0.1:${await freePort()}/moderate`;
    expect(await ask('fail_open', { url })).toMatchObject({ decision: 'allow', failedOpen: true, failure: expect.stringContaining('could not be reached') });
    expect(await ask('fail_closed', { url })).toMatchObject({ decision: 'block', failedOpen: false, failure: expect.stringContaining('ECONNREFUSED') });
  });

  it.each<[string, Script, string]>([
    ['a body that is not JSON', { status: 200, body: 'allow' }, 'did not answer {"decision"'],
    ['an empty body', { status: 200 }, 'did not answer {"decision"'],
    ['an unknown decision', { status: 200, body: '{"decision":"maybe"}' }, 'did not answer {"decision"'],
    ['an array', { status: 200, body: '[{"decision":"allow"}]' }, 'did not answer {"decision"'],
    ['a reason that is not a string', { status: 200, body: '{"decision":"allow","reason":42}' }, 'did not answer {"decision"'],
    ['an error status with an allow body', { status: 500, body: '{"decision":"allow"}' }, 'answered HTTP 500'],
    [
      'a body over the limit',
      { status: 200, body: JSON.stringify({ decision: 'allow', reason: 'x'.repeat(MAX_ANSWER_BYTES) }) },
      `more than ${MAX_ANSWER_BYTES} bytes`,
    ],
  ])('fails open or closed on %s', async (_name, answer, failure) => {
    script = answer;
    expect(await ask('fail_open')).toMatchObject({ decision: 'allow', reason: null, failedOpen: true, failure: expect.stringContaining(failure) });
    expect(await ask('fail_closed')).toMatchObject({ decision: 'block', reason: null, failedOpen: false, failure: expect.stringContaining(failure) });
  });

  it('does not follow a redirect', async () => {
    script = { status: 307, headers: { location: `${base}/elsewhere` } };
    expect(await ask('fail_open')).toMatchObject({
      decision: 'allow',
      failedOpen: true,
      failure: expect.stringContaining('redirect (HTTP 307), not followed'),
    });
    expect(received.map((r) => r.path)).toEqual(['/moderate']);
  });

  it('refuses a loopback or private address unless private networks are allowed, and never sends to it', async () => {
    for (const url of [`${base}/moderate`, `https://localhost:${new URL(base).port}/moderate`, 'https://10.0.0.7/moderate']) {
      expect(await ask('fail_closed', { url, allowPrivateNetworks: false })).toMatchObject({
        decision: 'block',
        failure: expect.stringContaining('loopback, private'),
      });
    }
    expect(received).toHaveLength(0);
    expect(await ask('fail_closed', { allowPrivateNetworks: true })).toMatchObject({ decision: 'allow' });
    expect(received).toHaveLength(1);
  });

  it('refuses a name that resolves to a loopback address at connect time', async () => {
    // This machine's own name resolves to a loopback address (as test/webhooks relies on too).
    const url = `https://${os.hostname()}:${new URL(base).port}/moderate`;
    expect(await ask('fail_closed', { url, allowPrivateNetworks: false })).toMatchObject({
      decision: 'block',
      failure: expect.stringContaining('resolves to a blocked address'),
    });
    expect(received).toHaveLength(0);
  });

  it('refuses link-local and metadata addresses even where private networks are allowed', async () => {
    for (const url of ['https://169.254.169.254/latest/meta-data', 'https://[fe80::1]/x', 'https://100.100.100.200/']) {
      expect(await ask('fail_open', { url, allowPrivateNetworks: true })).toMatchObject({
        decision: 'allow',
        failedOpen: true,
        failure: expect.stringContaining('link-local or metadata'),
      });
    }
  });

  it('checks the URL as the webhooks do, and requires https', () => {
    expect(moderationHookUrlProblem('https://moderation.example.com/hook', false)).toBeUndefined();
    expect(moderationHookUrlProblem('http://moderation.example.com/hook', false)).toBe('must be https (the hook is sent the prompt)');
    expect(moderationHookUrlProblem('https://user:pw@moderation.example.com/hook', false)).toBe('must not carry credentials');
    expect(moderationHookUrlProblem('not a url', false)).toBe('is not a URL');
    expect(moderationHookUrlProblem('https://127.0.0.1/hook', false)).toContain('loopback');
    expect(moderationHookUrlProblem('https://127.0.0.1/hook', true)).toBeUndefined();
  });

  it('fails on an http URL without sending the prompt in the clear', async () => {
    expect(await ask('fail_closed', { url: `http://127.0.0.1:${new URL(base).port}/moderate` })).toMatchObject({
      decision: 'block',
      failure: expect.stringContaining('must be https'),
    });
    expect(received).toHaveLength(0);
  });
});
