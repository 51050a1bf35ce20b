import { performance } from 'node:perf_hooks';
import { injectTraceContext, tracingEnabled, withSpan } from '../telemetry/tracing';
import { redactUpstreamText } from '../providers/redaction';
import { randomBase62 } from '../shared/ids';
import { type OutboundError, outboundRequest } from '../shared/outbound';
import { urlProblem } from '../shared/safe-url';
import { signedHeaders } from '../webhooks/signing';

/**
 * The external moderation hook (issue 38 §2): before a generation is paid for, the gateway asks an
 * operator's endpoint whether to go on. One POST of JSON
 * `{prompt, input_images: [{sha256, url?}], model, key_id, project_id}`, signed as webhooks are
 * (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` under the hook's
 * `whsec_` secret), over https only (the body carries the prompt), through the webhooks' address
 * guard (no loopback, private, link-local or metadata address, literal or after DNS, unless private
 * networks are allowed as for webhooks: WEBHOOK_ALLOW_PRIVATE_NETWORKS), no redirect followed (a 3xx
 * is a failure: following one would let the endpoint send the prompt elsewhere), one deadline for the
 * whole exchange. The endpoint answers 2xx with `{decision: "allow" | "block", reason?}`; anything
 * else (down, slow, another status, a body that is not that object or is over 16 KiB) is a failure,
 * and the hook's mode decides: `fail_open` allows, `fail_closed` blocks. Nothing here logs: the
 * caller records the outcome on the generation, and the prompt never reaches a log.
 */

export type HookFailureMode = 'fail_open' | 'fail_closed';

export interface ModerationHookSettings {
  /** The operator's https endpoint. */
  url: string;
  /** The Standard Webhooks secrets (`whsec_…`) to sign with: the hook's, then during a rotation's overlap its old one (one signature each). */
  secrets: readonly string[];
  timeoutMs: number;
  failureMode: HookFailureMode;
}

export interface ModerationHookNetwork {
  /** The webhooks' setting: loopback and private addresses allowed (development, tests); link-local and metadata never. */
  allowPrivateNetworks: boolean;
  /** Certificate authorities to trust instead of the system's (tests with a self-signed endpoint). */
  ca?: string | Buffer;
}

/** What the endpoint is asked about: the prompt, the input images by hash (and URL when one is signed), who asks. */
export interface ModerationSubject {
  prompt: string;
  inputImages: ReadonlyArray<{ sha256: string; url?: string }>;
  model: string;
  keyId: string;
  projectId: string;
}

/**
 * The hook's verdict, to record on the generation. `reason` is the endpoint's (at most 1000
 * characters), without the prompt where it quotes it (`[prompt]`) and without control characters.
 * When the endpoint could not be asked or answered nonsense, `failure` says why and `failedOpen`
 * whether the request went on anyway (fail_open) or was blocked (fail_closed).
 */
export interface ModerationOutcome {
  decision: 'allow' | 'block';
  reason: string | null;
  latencyMs: number;
  failedOpen?: boolean;
  failure?: string;
}

export const MAX_ANSWER_BYTES = 16 * 1024;
const MAX_REASON_LENGTH = 1000;

/** Why a URL cannot be a moderation hook (checked when it is set, and again before each call), or undefined. */
export function moderationHookUrlProblem(raw: string, allowPrivateNetworks: boolean): string | undefined {
  const problem = urlProblem(raw, allowPrivateNetworks);
  if (problem) return problem;
  return new URL(raw).protocol === 'https:' ? undefined : 'must be https (the hook is sent the prompt)';
}

export async function askModerationHook(
  settings: ModerationHookSettings,
  subject: ModerationSubject,
  network: ModerationHookNetwork,
): Promise<ModerationOutcome> {
  if (!tracingEnabled()) return ask(settings, subject, network);
  return withSpan(
    'moderation hook',
    { 'gateway.project.id': subject.projectId },
    async (span) => {
      const outcome = await ask(settings, subject, network);
      span.set({ 'gateway.moderation.decision': outcome.decision });
      if (outcome.failure !== undefined) span.fail('moderation_hook_failure');
      return outcome;
    },
    { kind: 'client' },
  );
}

async function ask(settings: ModerationHookSettings, subject: ModerationSubject, network: ModerationHookNetwork): Promise<ModerationOutcome> {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  const failed = (failure: string): ModerationOutcome => {
    const open = settings.failureMode === 'fail_open';
    return { decision: open ? 'allow' : 'block', reason: null, latencyMs: latency(), failedOpen: open, failure };
  };
  const problem = moderationHookUrlProblem(settings.url, network.allowPrivateNetworks);
  if (problem) return failed(`the hook URL ${problem}`);
  const body = JSON.stringify({
    prompt: subject.prompt,
    input_images: subject.inputImages.map((image) => (image.url === undefined ? { sha256: image.sha256 } : { sha256: image.sha256, url: image.url })),
    model: subject.model,
    key_id: subject.keyId,
    project_id: subject.projectId,
  });
  // Receivers check webhook-timestamp against their own clock: the wall-clock time, as webhooks send.
  const headers = signedHeaders(settings.secrets, `msg_${randomBase62(22)}`, Math.floor(Date.now() / 1000), body);
  injectTraceContext(headers);
  const answer = await exchange(settings.url, headers, body, settings.timeoutMs, network);
  if ('error' in answer) return failed(answer.error);
  if (answer.status >= 300 && answer.status < 400) return failed(`the hook answered a redirect (HTTP ${answer.status}), not followed`);
  if (answer.status < 200 || answer.status >= 300) return failed(`the hook answered HTTP ${answer.status}`);
  const verdict = parseVerdict(answer.text, subject.prompt);
  if (!verdict) return failed('the hook did not answer {"decision": "allow" | "block", "reason"?: string}');
  return { ...verdict, latencyMs: latency() };
}

/** The endpoint's verdict; its reason is outside text, redacted as an upstream's is (the prompt it may quote goes first). */
function parseVerdict(text: string, prompt: string): Pick<ModerationOutcome, 'decision' | 'reason'> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const { decision, reason } = parsed as Record<string, unknown>;
  if (decision !== 'allow' && decision !== 'block') return undefined;
  if (reason !== undefined && reason !== null && typeof reason !== 'string') return undefined;
  return { decision, reason: typeof reason === 'string' ? redactUpstreamText(reason, [], { prompt, maxLength: MAX_REASON_LENGTH }) : null };
}

type Exchange = { status: number; text: string } | { error: string };

/** One POST through the guarded outbound agent (shared/outbound.ts); the body read up to MAX_ANSWER_BYTES; `timeoutMs` for connecting, sending and reading alike. */
async function exchange(rawUrl: string, headers: Record<string, string>, body: string, timeoutMs: number, network: ModerationHookNetwork): Promise<Exchange> {
  try {
    const answer = await outboundRequest(new URL(rawUrl), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'creative-gateway-moderation', ...headers },
      body,
      policy: { allowPrivate: network.allowPrivateNetworks, ...(network.ca ? { ca: network.ca } : {}) },
      signal: AbortSignal.timeout(timeoutMs),
      maxBytes: MAX_ANSWER_BYTES,
    });
    return { status: answer.status, text: answer.body.toString('utf8') };
  } catch (error) {
    const failure = error as OutboundError;
    if (failure.kind === 'too_large') return { error: `the hook answered more than ${MAX_ANSWER_BYTES} bytes` };
    if (failure.kind === 'aborted') return { error: `the hook did not answer within ${timeoutMs} ms` };
    return { error: `the hook could not be reached: ${failure.message.slice(0, 300)}` };
  }
}
