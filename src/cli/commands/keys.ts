import { type Command, InvalidArgumentError } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { fillPath } from '../../http/operation-path';
import { callAdminApi } from '../admin-client';
import { print, record, table } from '../output';
import type { CommandContext } from '../program';

type Schemas = components['schemas'];
type Key = Schemas['Key'];
type CreatedKey = Schemas['CreatedKey'];

function wholeNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('must be a whole number');
  return n;
}

function providerList(value: string): string[] {
  const providers = value.split(',').map((p) => p.trim()).filter(Boolean);
  if (providers.length === 0) throw new InvalidArgumentError('must name at least one provider');
  return providers;
}

function expiry(value: string): string | null {
  if (value === 'never') return null;
  if (Number.isNaN(Date.parse(value))) throw new InvalidArgumentError('must be an ISO 8601 time (2027-01-31T00:00:00Z) or "never"');
  return new Date(value).toISOString();
}

/** A key's fields; a new or rotated key's secret after them, with the reminder that it is shown once. */
function showKey(key: Key & { key?: string }): string {
  const fields = record({
    id: key.id,
    name: key.name,
    owner: key.owner,
    status: key.status,
    hint: key.hint,
    credits: `${key.credits_used} used of ${key.credits_quota} (${key.credits_remaining} left), every ${key.quota_period_days} days`,
    period_resets_at: key.period_resets_at,
    rate_limit_rpm: key.rate_limit_rpm,
    allowed_providers: key.allowed_providers,
    expires_at: key.expires_at,
    created_at: key.created_at,
    disabled_at: key.disabled_at,
    last_used_at: key.last_used_at,
  });
  return key.key === undefined ? fields : `${fields}\n\nkey: ${key.key}\n(shown only now: store it; the gateway keeps only its hash)`;
}

// Paths come from the spec (generated/gateway.operations.ts), never written here.
const keyPath = (id: string) => fillPath(gatewayOperations.getKey.path, { id });

/** `keys ...`: every admin key operation of openapi/gateway.yaml. */
export function registerKeyCommands(program: Command, context: CommandContext): void {
  const keys = program.command('keys').description('create, inspect and manage client API keys');

  keys
    .command('create')
    .description('issue a key (its secret is printed once)')
    .requiredOption('--name <name>', 'what the key is for')
    .requiredOption('--owner <owner>', 'who is responsible for it')
    .requiredOption('--credits <n>', 'credits per period', wholeNumber)
    .requiredOption('--period-days <n>', 'length of a quota period in days', wholeNumber)
    .option('--rpm <n>', 'requests per minute', wholeNumber)
    .option('--providers <list>', 'allowed providers, comma-separated (e.g. local,jimeng)', providerList)
    .option('--expires-in-days <n>', 'expire the key after this many days', wholeNumber)
    .action(async (options: { name: string; owner: string; credits: number; periodDays: number; rpm?: number; providers?: string[]; expiresInDays?: number }, command: Command) => {
      const body: Schemas['CreateKeyRequest'] = {
        name: options.name,
        owner: options.owner,
        credits_quota: options.credits,
        quota_period_days: options.periodDays,
        ...(options.rpm === undefined ? {} : { rate_limit_rpm: options.rpm }),
        ...(options.providers === undefined ? {} : { allowed_providers: options.providers as Schemas['CreateKeyRequest']['allowed_providers'] }),
        ...(options.expiresInDays === undefined ? {} : { expires_in_days: options.expiresInDays }),
      };
      const created = await callAdminApi<CreatedKey>(context.connection(command), 'POST', gatewayOperations.createKey.path, body);
      print(context.output(command), created, () => showKey(created));
    });

  keys
    .command('list')
    .description('list keys, newest first (a table; --json for the API answer)')
    .option('--owner <owner>', 'only this owner')
    .option('--status <status>', 'active, disabled or expired')
    .option('--limit <n>', 'keys per page', wholeNumber)
    .option('--cursor <cursor>', 'the next_cursor of a previous page')
    .action(async (options: { owner?: string; status?: string; limit?: number; cursor?: string }, command: Command) => {
      const query = new URLSearchParams();
      for (const [name, value] of Object.entries(options)) if (value !== undefined) query.set(name, String(value));
      const page = await callAdminApi<Schemas['KeyList']>(context.connection(command), 'GET', `${gatewayOperations.listKeys.path}${query.size > 0 ? `?${query}` : ''}`);
      print(context.output(command), page, () => {
        const rows = table(page.data, [
          ['id', (k) => k.id],
          ['name', (k) => k.name],
          ['owner', (k) => k.owner],
          ['status', (k) => k.status],
          ['credits', (k) => `${k.credits_used}/${k.credits_quota}`],
          ['period', (k) => `${k.quota_period_days}d`],
          ['rpm', (k) => k.rate_limit_rpm],
          ['providers', (k) => k.allowed_providers],
          ['expires', (k) => k.expires_at],
        ]);
        return page.next_cursor ? `${rows}\n\nmore: --cursor ${page.next_cursor}` : rows;
      });
    });

  keys
    .command('update')
    .description('change a key: name, owner, limits, providers, expiry, or enable a disabled key')
    .argument('<id>', 'key id (key_...)')
    .option('--name <name>', 'new name')
    .option('--owner <owner>', 'new owner')
    .option('--rpm <n>', 'requests per minute', wholeNumber)
    .option('--providers <list>', 'allowed providers, comma-separated', providerList)
    .option('--expires-at <time>', 'new expiry (ISO 8601), or "never"', expiry)
    .option('--enable', 're-enable a disabled key')
    .option('--disable', 'disable the key')
    .action(async (id: string, options: { name?: string; owner?: string; rpm?: number; providers?: string[]; expiresAt?: string | null; enable?: boolean; disable?: boolean }, command: Command) => {
      if (options.enable && options.disable) command.error('error: --enable and --disable contradict each other', { exitCode: 2 });
      const body: Schemas['UpdateKeyRequest'] = {
        ...(options.name === undefined ? {} : { name: options.name }),
        ...(options.owner === undefined ? {} : { owner: options.owner }),
        ...(options.rpm === undefined ? {} : { rate_limit_rpm: options.rpm }),
        ...(options.providers === undefined ? {} : { allowed_providers: options.providers as Schemas['UpdateKeyRequest']['allowed_providers'] }),
        ...(options.expiresAt === undefined ? {} : { expires_at: options.expiresAt }),
        ...(options.enable ? { status: 'active' as const } : {}),
        ...(options.disable ? { status: 'disabled' as const } : {}),
      };
      if (Object.keys(body).length === 0) command.error('error: nothing to change: give at least one option (see --help)', { exitCode: 2 });
      const key = await callAdminApi<Key>(context.connection(command), 'PATCH', keyPath(id), body);
      print(context.output(command), key, () => showKey(key));
    });

  keys
    .command('quota')
    .description("set a key's credits per period")
    .argument('<id>', 'key id (key_...)')
    .requiredOption('--credits <n>', 'credits per period', wholeNumber)
    .option('--period-days <n>', 'new period length in days', wholeNumber)
    .option('--reset', 'also set the credits used this period to 0')
    .action(async (id: string, options: { credits: number; periodDays?: number; reset?: boolean }, command: Command) => {
      const body: Schemas['SetQuotaRequest'] = {
        credits_quota: options.credits,
        ...(options.periodDays === undefined ? {} : { quota_period_days: options.periodDays }),
        ...(options.reset ? { reset_usage: true } : {}),
      };
      const key = await callAdminApi<Key>(context.connection(command), 'POST', fillPath(gatewayOperations.setKeyQuota.path, { id }), body);
      print(context.output(command), key, () => showKey(key));
    });

  // Commands that take only a key id: one call, one key in the answer.
  const byId: Array<{ name: string; description: string; method: string; route: (id: string) => string; body?: Schemas['UpdateKeyRequest'] }> = [
    { name: 'get', description: 'show one key', method: 'GET', route: keyPath },
    { name: 'enable', description: 're-enable a disabled key (same as update --enable)', method: 'PATCH', route: keyPath, body: { status: 'active' } },
    { name: 'disable', description: 'disable a key (refused from its next request on; the record is kept)', method: 'DELETE', route: keyPath },
    {
      name: 'rotate',
      description: 'replace the secret (the old one stops working at once; the new one is printed once)',
      method: 'POST',
      route: (id) => fillPath(gatewayOperations.rotateKey.path, { id }),
    },
  ];
  for (const operation of byId) {
    keys
      .command(operation.name)
      .description(operation.description)
      .argument('<id>', 'key id (key_...)')
      .action(async (id: string, _options: unknown, command: Command) => {
        // rotate answers a CreatedKey (with the new secret); the others a Key.
        const key = await callAdminApi<Key | CreatedKey>(context.connection(command), operation.method, operation.route(id), operation.body);
        print(context.output(command), key, () => showKey(key));
      });
  }
}
