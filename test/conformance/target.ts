import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type FakeVisual, startFakeVisual } from '../fakes/fake-volc-visual';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { ADMIN_SECRET, SERVICE_TOKEN } from '../helpers/test-gateway';

export type Json = Record<string, unknown>;

/**
 * What the conformance stage runs against. By default a real gateway process (dist/) on a fresh
 * SQLite file, with the jimeng visual transport pointed at the local fake (so provider failures
 * can be provoked) and the Ark transport left unconfigured (so "not configured" can be seen).
 *
 * A client team points the same checks at its own deployment instead:
 *   CONFORMANCE_GATEWAY_URL=https://gw.example.net CONFORMANCE_INTERNAL_URL=https://gw-internal.example.net \
 *   CONFORMANCE_ADMIN_SECRET=... CONFORMANCE_SERVICE_TOKEN=id:secret npm run conformance
 * (it creates keys and generates with `local-1`: use a staging deployment).
 */
export interface ConformanceTarget {
  gatewayUrl: string;
  internalUrl: string;
  adminSecret: string;
  serviceToken: Record<string, string>;
  /** The served documents, as the deployment serves them. */
  documents: { gateway: Json; creative: Json };
  /** False against a remote deployment: provider failures cannot be provoked there. */
  local: boolean;
  /** The fake jimeng visual API the local gateway calls (its `requests` show what arrived). */
  visual?: FakeVisual;
  /** The served documents written to files (for CLI tools). */
  files: { gateway: string; creative: string; dir: string };
  close(): Promise<void>;
}

export const FAKE_VISUAL_CREDENTIALS = { accessKeyId: 'AKconformance', secretAccessKey: 'conformance-secret' };

async function fetchJson(url: string, headers: Record<string, string> = {}): Promise<Json> {
  const res = await fetch(url, { headers });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Json;
}

export async function conformanceTarget(): Promise<ConformanceTarget> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-conformance-'));
  let gateway: GatewayProcess | undefined;
  let visual: FakeVisual | undefined;
  let target: Omit<ConformanceTarget, 'documents' | 'files' | 'close'>;
  const remote = process.env.CONFORMANCE_GATEWAY_URL;
  if (remote) {
    const [id = '', secret = ''] = (process.env.CONFORMANCE_SERVICE_TOKEN ?? ':').split(/:(.*)/s);
    target = {
      gatewayUrl: remote.replace(/\/$/, ''),
      internalUrl: (process.env.CONFORMANCE_INTERNAL_URL ?? '').replace(/\/$/, ''),
      adminSecret: process.env.CONFORMANCE_ADMIN_SECRET ?? '',
      serviceToken: { 'CF-Access-Client-Id': id, 'CF-Access-Client-Secret': secret },
      local: false,
    };
  } else {
    visual = await startFakeVisual(FAKE_VISUAL_CREDENTIALS);
    gateway = await startGatewayProcess({
      DATABASE_URL: path.join(dir, 'gateway.db'),
      // info: the start-up line carries the ports.
      LOG_LEVEL: 'info',
      VOLC_ACCESS_KEY_ID: FAKE_VISUAL_CREDENTIALS.accessKeyId,
      VOLC_SECRET_ACCESS_KEY: FAKE_VISUAL_CREDENTIALS.secretAccessKey,
      VOLC_VISUAL_ENDPOINT: visual.url,
      VOLC_POLL_INTERVAL_MS: '5',
      PROVIDER_JIMENG_TIMEOUT_MS: '2000',
      PROVIDER_JIMENG_RETRY_BASE_DELAY_MS: '1',
      PROVIDER_JIMENG_BREAKER_THRESHOLD: '1000',
    }).catch((error: unknown) => {
      void visual?.close();
      throw error;
    });
    target = { gatewayUrl: gateway.url, internalUrl: gateway.internalUrl, adminSecret: ADMIN_SECRET, serviceToken: SERVICE_TOKEN, local: true };
  }
  const documents = {
    gateway: await fetchJson(`${target.gatewayUrl}/openapi.json`),
    creative: await fetchJson(`${target.internalUrl}/api/v1/creative/openapi.json`, target.serviceToken),
  };
  const files = { gateway: path.join(dir, 'gateway.json'), creative: path.join(dir, 'creative.json'), dir };
  fs.writeFileSync(files.gateway, JSON.stringify(documents.gateway, null, 2));
  fs.writeFileSync(files.creative, JSON.stringify(documents.creative, null, 2));
  return {
    ...target,
    visual,
    documents,
    files,
    async close() {
      await gateway?.stop();
      await visual?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
