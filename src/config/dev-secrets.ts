import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { randomBase62 } from '../shared/ids';
import { ConfigError } from './config-error';
import type { ServiceToken } from './config-types';
import { sealingKey } from './env-types';

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

function write(file: string, content: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content, { mode: 0o600 });
}

function adminSecret(production: boolean, directory: string, announce: Announce): string {
  if (production) throw new ConfigError('ADMIN_SECRET is required when NODE_ENV=production');
  const file = path.join(directory, 'admin-secret');
  if (fs.existsSync(file)) {
    announce(`Using the admin secret stored in ${file}`);
    return fs.readFileSync(file, 'utf8').trim();
  }
  const secret = `adm_${randomBase62(40)}`;
  write(file, `${secret}\n`);
  announce(`Generated an admin secret (stored in ${file}, shown only now):\n\n    ADMIN_SECRET=${secret}\n`);
  return secret;
}

/** A service token pair for the internal API (CF_ACCESS_CLIENT_ID / CF_ACCESS_CLIENT_SECRET). */
function serviceTokens(production: boolean, directory: string, announce: Announce): ServiceToken[] {
  if (production) throw new ConfigError('CF_ACCESS_CLIENT_ID and CF_ACCESS_CLIENT_SECRET are required when NODE_ENV=production');
  const file = path.join(directory, 'service-token');
  if (fs.existsSync(file)) {
    const [clientId, clientSecret] = fs.readFileSync(file, 'utf8').trim().split('\n');
    if (clientId && clientSecret) {
      announce(`Using the internal API service token stored in ${file}`);
      return [{ clientId, clientSecret }];
    }
  }
  const token = { clientId: `svc_${randomBase62(16)}.access`, clientSecret: randomBase62(48) };
  write(file, `${token.clientId}\n${token.clientSecret}\n`);
  announce(
    `Generated a service token for the internal API (stored in ${file}, shown only now):\n\n    CF-Access-Client-Id: ${token.clientId}\n    CF-Access-Client-Secret: ${token.clientSecret}\n`,
  );
  return [token];
}

function sealingKeys(production: boolean, directory: string, announce: Announce): Buffer[] {
  if (production) throw new ConfigError('CHANNEL_SEALING_KEY is required when NODE_ENV=production (openssl rand -hex 32)');
  const file = path.join(directory, 'channel-sealing-key');
  let raw: string;
  if (fs.existsSync(file)) {
    raw = fs.readFileSync(file, 'utf8').trim();
  } else {
    raw = randomBytes(32).toString('hex');
    write(file, `${raw}\n`);
    announce(`Generated a channel sealing key (stored in ${file}); set CHANNEL_SEALING_KEY to it on every replica.`);
  }
  const key = sealingKey(raw);
  if (key === undefined) throw new ConfigError(`${file} must hold a 32-byte CHANNEL_SEALING_KEY, as 64 hex characters or base64`);
  return [key];
}

function imageSigningKey(production: boolean, directory: string, announce: Announce): string {
  if (production) throw new ConfigError('IMAGE_URL_SIGNING_KEY is required when NODE_ENV=production');
  const file = path.join(directory, 'image-url-key');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Written aside, then linked into place (atomic, fails if present): of several processes
  // starting at once, one key wins and every process reads that one.
  const draft = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(draft, `${randomBase62(48)}\n`, { mode: 0o600 });
  try {
    fs.linkSync(draft, file);
    announce(`Generated the image URL signing key (stored in ${file}); set IMAGE_URL_SIGNING_KEY to share one between replicas.`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    fs.rmSync(draft, { force: true });
  }
  return fs.readFileSync(file, 'utf8').trim();
}
