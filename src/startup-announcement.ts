import type { GatewayConfig } from './config/config';
import { maskUrl } from './config/env-types';
import type { components } from '../generated/creative';

/** Where a started gateway answers, as a person on the same machine reaches it. */
export interface ListeningUrls {
  /** The public API (also where signed image URLs point unless IMAGE_PUBLIC_BASE_URL says otherwise). */
  api: string;
  /** The API reference (Scalar). */
  docs: string;
  /** The operator console. */
  console: string;
  /** The internal creative API. */
  internal: string;
}

/** A catalog model and whether anything serves it: `unconfigured` when no channel (or account) is set up for it. */
export interface ModelInService {
  model: string;
  status: components['schemas']['Model']['status'];
}

/** The URLs of listeners bound to `host` (all interfaces: localhost). */
export function listeningUrls(host: string, publicPort: number, internalPort: number): ListeningUrls {
  const name = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  const api = `http://${name}:${publicPort}`;
  return { api, docs: `${api}/docs`, console: `${api}/console`, internal: `http://${name}:${internalPort}` };
}

/**
 * What `npm start` shows a person at a terminal once the gateway serves (the JSON log line says the
 * same for log collectors): the URLs, and the catalog's models with those no channel serves marked.
 */
export function describeListening(urls: ListeningUrls, models: readonly ModelInService[]): string[] {
  const named = models.map(({ model, status }) =>
    status === 'unconfigured' ? `${model} (no channel)` : status === 'degraded' ? `${model} (degraded)` : model,
  );
  return [
    `creative-gateway listening on ${urls.api}: API reference ${urls.docs}, console ${urls.console}, internal API ${urls.internal}`,
    `models: ${named.length > 0 ? named.join(', ') : 'none'}`,
  ];
}

/**
 * The startup's configuration line in a few fields an operator reads at a glance (the effective
 * configuration in full, secrets masked, is the `debug` line "effective configuration"): where it
 * listens and stores, what it serves, what is turned on. No secret is in it; passwords in URLs are masked.
 */
export function summarizeConfig(config: GatewayConfig): Record<string, unknown> {
  const store = config.images.store;
  return {
    node_env: config.nodeEnv,
    listen: `${config.host}:${config.port}`,
    internal_port: config.internalPort,
    database: config.databaseUrl.startsWith('postgres') ? maskUrl(config.databaseUrl) : 'sqlite',
    redis: config.redisUrl === undefined ? null : maskUrl(config.redisUrl),
    rate_limit_store: config.rateLimitStore,
    image_store: store.kind === 'directory' ? `directory ${store.directory}` : `s3 ${store.bucket}`,
    models: config.catalog.length,
    environment_accounts: config.providers.accounts.map((account) => account.provider),
    console_sso: config.consoleSso ? 'on' : 'off',
    traces: config.telemetry.tracesUrl === undefined ? 'off' : new URL(config.telemetry.tracesUrl).origin,
    log_level: config.logLevel,
  };
}
