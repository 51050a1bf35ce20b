import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import request, { type Response } from 'supertest';
import { loadConfig } from '../../src/config/config';
import { loadOpenApiDocument } from '../../src/http/openapi-document';
import { type RunningGateway, startGateway } from '../../src/server';
import { recordOperations } from './operation-recorder';
import { SpecResponses } from './spec-responses';
import { createThrowawayDatabase, testEngine } from './test-database';
import { TEST_REDIS_URL, throwawayRedisPrefix } from './test-redis';
import { TestClock } from './test-clock';

export const ADMIN_SECRET = 'test-admin-secret-0123456789';
/** The service token the test gateways accept on the internal API. */
export const SERVICE_TOKEN = { 'CF-Access-Client-Id': 'svc-tests.access', 'CF-Access-Client-Secret': 'service-secret-for-tests-0123' };

/** The image URL signing key of test gateways (tests sign URLs of their own with it). */
export const IMAGE_URL_SIGNING_KEY = 'test-image-url-signing-key-0123456789abcdef';

type Method = 'get' | 'head' | 'post' | 'patch' | 'delete' | 'put';

const gatewayDocument = loadOpenApiDocument('gateway');
const creativeDocument = loadOpenApiDocument('creative');
const gatewaySpec = new SpecResponses('gateway', gatewayDocument);
const creativeSpec = new SpecResponses('creative', creativeDocument);

/** HTTP client for tests: every response is checked against the spec before the test sees it. */
export class ApiClient {
  constructor(
    readonly url: string,
    private readonly spec: SpecResponses = gatewaySpec,
  ) {}

  async send(method: Method, path: string, options: { body?: unknown; headers?: Record<string, string>; rawBody?: string } = {}): Promise<Response> {
    let req = request(this.url)[method](path);
    for (const [name, value] of Object.entries(options.headers ?? {})) req = req.set(name, value);
    if (options.rawBody !== undefined) req = req.send(options.rawBody);
    else if (options.body !== undefined) req = req.send(options.body as object);
    const res = await req;
    const problem = this.spec.check(method, path, res);
    if (problem) throw new Error(`Response does not match the spec: ${problem}\n${res.status} ${res.text.slice(0, 500)}`);
    return res;
  }

  admin(method: Method, path: string, body?: unknown): Promise<Response> {
    return this.send(method, path, { body, headers: { Authorization: `Bearer ${ADMIN_SECRET}` } });
  }

  /** A key's credits_used, read through the admin API (anything but 200 fails the test). */
  async creditsUsed(keyId: string): Promise<number> {
    const res = await this.admin('get', `/admin/keys/${keyId}`);
    if (res.status !== 200) throw new Error(`getKey ${keyId}: ${res.status} ${res.text}`);
    return res.body.credits_used as number;
  }

  client(key: string, body: unknown, path = '/images/generate'): Promise<Response> {
    return this.send('post', path, { body, headers: { Authorization: `Bearer ${key}` } });
  }

  /** With the test service token (internal API). */
  service(method: Method, path: string, body?: unknown): Promise<Response> {
    return this.send(method, path, { body, headers: SERVICE_TOKEN });
  }
}

export interface TestGateway {
  gateway: RunningGateway;
  /** DATABASE_URL of this gateway's throwaway database (a SQLite file path or a PostgreSQL URL). */
  databaseUrl: string;
  api: ApiClient;
  /** The internal creative API, its responses checked against openapi/creative.yaml. */
  internal: ApiClient;
  clock: TestClock;
  /** Every log line the gateway wrote. */
  logs: string[];
  /** IMAGE_DIRECTORY: where it stores images (removed on close). */
  imageDirectory: string;
  /** Creates a key through the admin API; `local` provider and a generous quota unless overridden. */
  createKey(overrides?: Record<string, unknown>): Promise<{ id: string; key: string; record: Record<string, unknown> }>;
  close(): Promise<void>;
}

export async function startTestGateway(env: Record<string, string> = {}): Promise<TestGateway> {
  // A copy of the migrated template: the gateway's own migrations at start find nothing left to do.
  const database = await createThrowawayDatabase(testEngine, { migrated: true });
  // On the PostgreSQL project the gateway runs as replicas would: PostgreSQL + Redis.
  const redis = testEngine === 'postgres' ? throwawayRedisPrefix() : undefined;
  const scaleOut: Record<string, string> = redis ? { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: redis.prefix } : {};
  const clock = new TestClock();
  const logs: string[] = [];
  // Stored images go to a directory of this gateway's own, removed on close.
  const imageDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-images-'));
  const config = loadConfig(
    {
      NODE_ENV: 'test',
      PORT: '0',
      INTERNAL_PORT: '0',
      CF_ACCESS_CLIENT_ID: SERVICE_TOKEN['CF-Access-Client-Id'],
      CF_ACCESS_CLIENT_SECRET: SERVICE_TOKEN['CF-Access-Client-Secret'],
      HOST: '127.0.0.1',
      DATABASE_URL: database.url,
      ADMIN_SECRET,
      // Shedding has its own tests (test/http/load-shedding.test.ts): on a loaded test machine a stall
      // would refuse requests a test expects served.
      SHED_EVENT_LOOP_DELAY_MS: '0',
      SHED_DATABASE_WAIT_MS: '0',
      // Reservations still go through the bounded path (its own database handle on PostgreSQL), with a
      // bound past the database deadline: a stalled test machine must not refuse them as overloaded.
      ADMISSION_DATABASE_WAIT_MS: '60000',
      LOG_LEVEL: 'info',
      VALIDATE_RESPONSES: 'true',
      IMAGE_URL_SIGNING_KEY,
      IMAGE_DIRECTORY: imageDirectory,
      // The fake upstreams listen on 127.0.0.1 (test/channels/channel-base-url.test.ts turns it off).
      CHANNEL_ALLOW_PRIVATE_UPSTREAMS: 'true',
      ...scaleOut,
      ...env,
    },
    () => undefined,
  );
  const gateway = await startGateway(config, { clock, logDestination: { write: (line: string) => logs.push(line) } });
  // What every test sends, for the operation coverage check (scripts/check-operation-coverage.mjs).
  recordOperations(gateway.apps.public, 'gateway', gatewayDocument);
  recordOperations(gateway.apps.internal, 'creative', creativeDocument);
  const api = new ApiClient(gateway.url);
  return {
    gateway,
    databaseUrl: database.url,
    api,
    internal: new ApiClient(gateway.internalUrl, creativeSpec),
    clock,
    logs,
    imageDirectory,
    createKey: (overrides = {}) => createKeyVia(api, overrides),
    async close() {
      await gateway.close();
      await database.drop();
      await redis?.drop();
      fs.rmSync(imageDirectory, { recursive: true, force: true });
    },
  };
}

/** Creates a key through any gateway's admin API: `local` provider and a generous quota unless overridden. */
export async function createKeyVia(
  api: ApiClient,
  overrides: Record<string, unknown> = {},
): Promise<{ id: string; key: string; record: Record<string, unknown> }> {
  const res = await api.admin('post', '/admin/keys', {
    name: 'test key',
    owner: 'tests@example.com',
    credits_quota: 1000,
    quota_period_days: 30,
    allowed_providers: ['local'],
    rate_limit_rpm: 1000,
    ...overrides,
  });
  if (res.status !== 201) throw new Error(`createKey failed: ${res.status} ${res.text}`);
  return { id: res.body.id as string, key: res.body.key as string, record: res.body as Record<string, unknown> };
}

/** A small valid generation request for the local provider. */
export function localRequest(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { prompt: 'a lighthouse at dawn', model: 'local-1', size: '32x32', response_format: 'b64_json', ...overrides };
}
