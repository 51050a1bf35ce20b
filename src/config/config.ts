import { configSchema, readCatalog, type GatewayConfig } from './gateway-config';
import { envSchema, readEnv } from './env-schema';
import type { CatalogModel } from './catalog';

export type { AccessJwtConfig, GatewayConfig, ServiceToken } from './gateway-config';
export { ConfigError } from './config-error';
export { describeConfig } from './describe-config';
export { dataDirectory } from './dev-secrets';
export { maskUrl } from './env-types';

type Env = Record<string, string | undefined>;

/** DATABASE_URL alone (for `npm run migrate`, which needs nothing else). */
export function databaseUrlFromEnv(env: Env = process.env): string {
  return readEnv(envSchema.pick({ DATABASE_URL: true }), env).DATABASE_URL;
}

/** The catalog MODEL_CATALOG / MODEL_CATALOG_FILE make of `env` (for `creative-gateway catalog`, which needs nothing else). */
export function catalogFromEnv(env: Env): CatalogModel[] {
  return readCatalog(readEnv(envSchema.pick({ MODEL_CATALOG: true, MODEL_CATALOG_FILE: true, CREDITS_PER_USD: true, PRICE_MARKUP: true }), env));
}

/**
 * The environment, parsed by the schema (src/config/env-schema.ts), checked across variables, and
 * with the secrets it lacks generated outside production (src/config/dev-secrets.ts).
 */
export function loadConfig(env: Env = process.env, announce: (line: string) => void = (l) => console.error(l)): GatewayConfig {
  return readEnv(configSchema(env, announce), env);
}
