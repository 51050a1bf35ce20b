import type { GatewayConfig } from './gateway-config';
import { namedVariables } from './env-schema';
import { envMeta, maskUrl, type EnvMeta } from './env-types';

const MASK = '***';

/** The GatewayConfig fields that hold a variable declared secret, and how each is masked. */
const SECRET_FIELDS: ReadonlyMap<string, Exclude<EnvMeta['secret'], false>> = new Map(
  Object.values(namedVariables).flatMap((type) => {
    const meta = envMeta.get(type);
    return meta?.secret && meta.field !== undefined ? [[meta.field, meta.secret] as const] : [];
  }),
);

function describe(value: unknown, field: string): unknown {
  const secret = SECRET_FIELDS.get(field);
  if (secret !== undefined && value !== undefined && value !== null) return secret === 'password' && typeof value === 'string' ? maskUrl(value) : MASK;
  if (value === undefined) return null;
  if (Array.isArray(value)) return value.map((item: unknown) => describe(item, `${field}.*`));
  if (typeof value === 'object' && value !== null && !Buffer.isBuffer(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, describe(item, field === '' ? key : `${field}.${key}`)]));
  }
  return value;
}

/**
 * The effective configuration for the startup log line: every field holding a variable the schema
 * declares secret is masked, nothing else hidden (unset fields are null, so they show too).
 */
export function describeConfig(config: GatewayConfig): Record<string, unknown> {
  return describe(config, '') as Record<string, unknown>;
}
