import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { randomBase62 } from '../shared/ids';
import { ConfigError } from './config-error';
import { sealingKey } from './env-types';

/** A Cloudflare-Access-style service token the internal API accepts (CF_ACCESS_CLIENT_ID / CF_ACCESS_CLIENT_SECRET). */
export interface ServiceToken {
  clientId: string;
  clientSecret: string;
}

/**
 * Outside production, secrets not configured are generated once, kept in the data directory
 * (mode 0600) and printed once, so `npm start` works with zero configuration. Production requires
 * them: replicas must share them, and a generated one would differ on each.
 */
export interface DevSecrets {
  adminSecret: string;
  serviceTokens: ServiceToken[];
  sealingKeys: Buffer[];
  imageSigningKey: string;
}

/** Directory for local state (SQLite file, generated secrets). */
export function dataDirectory(databaseUrl: string): string {
  if (databaseUrl.startsWith('postgres')) return path.resolve('data');
  return path.dirname(path.resolve(databaseUrl.replace(/^sqlite:/, '')));
}

type Announce = (line: string) => void;

/** What the environment gave: an empty list or undefined is "not configured". */
export interface GivenSecrets {
  adminSecret: string | undefined;
  serviceTokens: ServiceToken[];
  sealingKeys: Buffer[];
  imageSigningKey: string | undefined;
}

export function resolveDevSecrets(given: GivenSecrets, nodeEnv: string, databaseUrl: string, announce: Announce): DevSecrets {
  const production = nodeEnv === 'production';
  const directory = dataDirectory(databaseUrl);
  return {
    adminSecret: given.adminSecret ?? adminSecret(production, directory, announce),
    serviceTokens: given.serviceTokens.length > 0 ? given.serviceTokens : serviceTokens(production, directory, announce),
    sealingKeys: given.sealingKeys.length > 0 ? given.sealingKeys : sealingKeys(production, directory, announce),
    imageSigningKey: given.imageSigningKey ?? imageSigningKey(production, directory, announce),
  };
}

/**
 * The file's content, made by `make` and written once: of several processes starting at once from
 * one checkout, one writes it (drafted aside, then linked into place: atomic, fails if present) and
 * every process reads that one. `created`: this process wrote it.
 */
function createdOnce(file: string, make: () => string): { content: string; created: boolean } {
  if (fs.existsSync(file)) return { content: fs.readFileSync(file, 'utf8').trim(), created: false };
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const draft = `${file}.${process.pid}.${randomBase62(8)}.tmp`;
  fs.writeFileSync(draft, `${make()}\n`, { mode: 0o600 });
  let created = false;
  try {
    fs.linkSync(draft, file);
    created = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    fs.rmSync(draft, { force: true });
  }
  return { content: fs.readFileSync(file, 'utf8').trim(), created };
}

function adminSecret(production: boolean, directory: string, announce: Announce): string {
  if (production) throw new ConfigError('ADMIN_SECRET is required when NODE_ENV=production');
  const file = path.join(directory, 'admin-secret');
  const { content: secret, created } = createdOnce(file, () => `adm_${randomBase62(40)}`);
  announce(
    created ? `Generated an admin secret (stored in ${file}, shown only now):\n\n    ADMIN_SECRET=${secret}\n` : `Using the admin secret stored in ${file}`,
  );
  return secret;
}

/** A service token pair for the internal API (CF_ACCESS_CLIENT_ID / CF_ACCESS_CLIENT_SECRET). */
function serviceTokens(production: boolean, directory: string, announce: Announce): ServiceToken[] {
  if (production) throw new ConfigError('CF_ACCESS_CLIENT_ID and CF_ACCESS_CLIENT_SECRET are required when NODE_ENV=production');
  const file = path.join(directory, 'service-token');
  const { content, created } = createdOnce(file, () => `svc_${randomBase62(16)}.access\n${randomBase62(48)}`);
  const [clientId, clientSecret] = content.split('\n');
  if (!clientId || !clientSecret)
    throw new ConfigError(`${file} must hold a service token's client id and secret, one per line (delete it to have one generated)`);
  announce(
    created
      ? `Generated a service token for the internal API (stored in ${file}, shown only now):\n\n    CF-Access-Client-Id: ${clientId}\n    CF-Access-Client-Secret: ${clientSecret}\n`
      : `Using the internal API service token stored in ${file}`,
  );
  return [{ clientId, clientSecret }];
}

function sealingKeys(production: boolean, directory: string, announce: Announce): Buffer[] {
  if (production) throw new ConfigError('CHANNEL_SEALING_KEY is required when NODE_ENV=production (openssl rand -hex 32)');
  const file = path.join(directory, 'channel-sealing-key');
  const { content, created } = createdOnce(file, () => randomBytes(32).toString('hex'));
  if (created) announce(`Generated a channel sealing key (stored in ${file}); set CHANNEL_SEALING_KEY to it on every replica.`);
  const key = sealingKey(content);
  if (key === undefined) throw new ConfigError(`${file} must hold a 32-byte CHANNEL_SEALING_KEY, as 64 hex characters or base64`);
  return [key];
}

function imageSigningKey(production: boolean, directory: string, announce: Announce): string {
  if (production) throw new ConfigError('IMAGE_URL_SIGNING_KEY is required when NODE_ENV=production');
  const file = path.join(directory, 'image-url-key');
  const { content, created } = createdOnce(file, () => randomBase62(48));
  if (created) announce(`Generated the image URL signing key (stored in ${file}); set IMAGE_URL_SIGNING_KEY to share one between replicas.`);
  return content;
}
