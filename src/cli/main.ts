import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { components } from '../../generated/gateway';
import { gatewayOperations } from '../../generated/gateway.operations';
import { fillPath } from '../http/operation-path';

/**
 * `npx creative-gateway keys <command>`: the admin API from a terminal. Talks HTTP to a running
 * gateway (GATEWAY_URL, default http://localhost:8080) with ADMIN_SECRET (default: the one
 * `npm start` generated in ./data/admin-secret). Prints the API's JSON; exits 1 on an API error.
 */
type Schemas = components['schemas'];

const USAGE = `Usage: creative-gateway keys <command> [options]

  create  --name N --owner O --credits N --period-days N [--rpm N] [--providers a,b] [--expires-in-days N]
  list    [--owner O] [--status active|disabled|expired] [--limit N] [--cursor C]
  get     <key id>
  disable <key id>
  quota   <key id> --credits N [--period-days N] [--reset]
  rotate  <key id>

Environment: GATEWAY_URL (default http://localhost:8080), ADMIN_SECRET (default: ./data/admin-secret)`;

function adminSecret(): string {
  if (process.env.ADMIN_SECRET) return process.env.ADMIN_SECRET;
  const file = path.resolve('data/admin-secret');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  throw new UsageError('Set ADMIN_SECRET (or run from the directory where `npm start` created data/admin-secret).');
}

class UsageError extends Error {}

function integer(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new UsageError(`--${flag} must be a whole number`);
  return n;
}

function required<T>(value: T | undefined, flag: string): T {
  if (value === undefined) throw new UsageError(`--${flag} is required`);
  return value;
}

async function call(method: string, route: string, body?: unknown): Promise<unknown> {
  const base = (process.env.GATEWAY_URL ?? 'http://localhost:8080').replace(/\/$/, '');
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { Authorization: `Bearer ${adminSecret()}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await response.json()) as unknown;
  if (!response.ok) {
    const error = (json as Schemas['Error']).error;
    throw new Error(`${response.status} ${error.code}: ${error.message}`);
  }
  return json;
}

export async function run(argv: string[]): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      owner: { type: 'string' },
      credits: { type: 'string' },
      'period-days': { type: 'string' },
      rpm: { type: 'string' },
      providers: { type: 'string' },
      'expires-in-days': { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      reset: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  const [group, command, id] = positionals;
  if (values.help || group !== 'keys' || command === undefined) throw new UsageError(USAGE);
  // Paths come from the spec (generated/gateway.operations.ts), never written here.
  const keyPath = (operationId: 'getKey' | 'disableKey' | 'rotateKey' | 'setKeyQuota') =>
    fillPath(gatewayOperations[operationId].path, { id: required(id, 'key id') });
  switch (command) {
    case 'create': {
      const body: Schemas['CreateKeyRequest'] = {
        name: required(values.name, 'name'),
        owner: required(values.owner, 'owner'),
        credits_quota: required(integer(values.credits, 'credits'), 'credits'),
        quota_period_days: required(integer(values['period-days'], 'period-days'), 'period-days'),
        ...(values.rpm ? { rate_limit_rpm: integer(values.rpm, 'rpm') } : {}),
        ...(values.providers ? { allowed_providers: values.providers.split(',').map((p) => p.trim()) } : {}),
        ...(values['expires-in-days'] ? { expires_in_days: integer(values['expires-in-days'], 'expires-in-days') } : {}),
      };
      return call('POST', gatewayOperations.createKey.path, body);
    }
    case 'list': {
      const query = new URLSearchParams();
      for (const name of ['owner', 'status', 'limit', 'cursor'] as const) if (values[name]) query.set(name, values[name]);
      return call('GET', `${gatewayOperations.listKeys.path}${query.size > 0 ? `?${query}` : ''}`);
    }
    case 'get':
      return call('GET', keyPath('getKey'));
    case 'disable':
      return call('DELETE', keyPath('disableKey'));
    case 'rotate':
      return call('POST', keyPath('rotateKey'));
    case 'quota': {
      const body: Schemas['SetQuotaRequest'] = {
        credits_quota: required(integer(values.credits, 'credits'), 'credits'),
        ...(values['period-days'] ? { quota_period_days: integer(values['period-days'], 'period-days') } : {}),
        ...(values.reset ? { reset_usage: true } : {}),
      };
      return call('POST', keyPath('setKeyQuota'), body);
    }
    default:
      throw new UsageError(USAGE);
  }
}

export function main(): void {
  run(process.argv.slice(2)).then(
    (result) => console.log(JSON.stringify(result, null, 2)),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : String(error));
      process.exit(error instanceof UsageError ? 2 : 1);
    },
  );
}
