import { type Command, InvalidArgumentError } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { fillPath } from '../../http/operation-path';
import { callAdminApi } from '../admin-client';
import {
  type Clearable,
  commaList,
  defined,
  enableDisable,
  numberList,
  orClear,
  pageOptions,
  repeatable,
  requireChange,
  timestamp,
  wholeNumber,
  withQuery,
} from '../options';
import { print, printPage, record } from '../output';
import type { CommandContext } from '../command-context';

type Schemas = components['schemas'];
type Key = Schemas['Key'];
type CreatedKey = Schemas['CreatedKey'];

const providerList = commaList('provider');

/** `name=value` of --metadata (repeated), as an entry of the key's metadata map. */
export function metadataEntry(value: string): [string, string] {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError('must be name=value');
  return [value.slice(0, at), value.slice(at + 1)];
}

/** A list, or "none" for no restriction (null). */
const listOrNone = (what: string) => orClear('none', commaList(what));

/** The key-policy options createKey and updateKey share. */
function policyOptions(command: Command): Command {
  return command
    .option('--max-concurrent <n>', 'generations in flight at once, across replicas ("none" for no cap)', orClear('none', wholeNumber))
    .option('--allowed-ips <list>', 'client addresses or CIDRs the key works from, comma-separated ("none" for anywhere)', listOrNone('address'))
    .option('--allowed-models <list>', 'catalog models the key may use, comma-separated ("none" for every model of its providers)', listOrNone('model'))
    .option('--metadata <name=value>', 'a label of your own (repeat for more; filter with `keys list --metadata name:value`)', repeatable(metadataEntry))
    .option('--alert-thresholds <list>', 'quota percentages that raise key.quota.threshold_reached, e.g. 80,100 ("" for none)', numberList);
}

interface PolicyOptions {
  maxConcurrent?: Clearable<number>;
  allowedIps?: Clearable<string[]>;
  allowedModels?: Clearable<string[]>;
  metadata?: Array<[string, string]>;
  alertThresholds?: number[];
}

function policyFields(options: PolicyOptions) {
  return defined({
    max_concurrent: options.maxConcurrent,
    allowed_ips: options.allowedIps,
    allowed_models: options.allowedModels,
    metadata: options.metadata === undefined ? undefined : Object.fromEntries(options.metadata),
    alert_thresholds: options.alertThresholds,
  });
}

const expiry = orClear('never', timestamp);

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
    max_concurrent: key.max_concurrent,
    allowed_ips: key.allowed_ips,
    allowed_models: key.allowed_models,
    metadata: Object.entries(key.metadata ?? {}).map(([name, value]) => `${name}=${value}`),
    alert_thresholds: key.alert_thresholds,
    project: key.project_id,
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

  policyOptions(
    keys
      .command('create')
      .description('issue a key (its secret is printed once)')
      .requiredOption('--name <name>', 'what the key is for')
      .requiredOption('--owner <owner>', 'who is responsible for it')
      .requiredOption('--credits <n>', 'credits per period', wholeNumber)
      .requiredOption('--period-days <n>', 'length of a quota period in days', wholeNumber)
      .option('--rpm <n>', 'requests per minute', wholeNumber)
      .option(
        '--providers <list>',
        'allowed providers, comma-separated (e.g. local,jimeng); without it the key gets jimeng only, not local (the built-in renderer, local-1)',
        providerList,
      )
      .option('--expires-in-days <n>', 'expire the key after this many days', wholeNumber)
      .option('--expires-at <time>', 'expire the key at this time (ISO 8601)', timestamp)
      .option('--project <id>', "the project (prj_...) whose budget and limits apply on top of the key's"),
  ).action(
    async (
      options: PolicyOptions & {
        name: string;
        owner: string;
        credits: number;
        periodDays: number;
        rpm?: number;
        providers?: string[];
        expiresInDays?: number;
        expiresAt?: string;
        project?: string;
      },
      command: Command,
    ) => {
      if (options.expiresInDays !== undefined && options.expiresAt !== undefined)
        command.error('error: give --expires-in-days or --expires-at, not both', { exitCode: 2 });
      const body: Schemas['CreateKeyRequest'] = {
        name: options.name,
        owner: options.owner,
        credits_quota: options.credits,
        quota_period_days: options.periodDays,
        ...(options.rpm === undefined ? {} : { rate_limit_rpm: options.rpm }),
        ...(options.providers === undefined ? {} : { allowed_providers: options.providers as Schemas['CreateKeyRequest']['allowed_providers'] }),
        ...(options.expiresInDays === undefined ? {} : { expires_in_days: options.expiresInDays }),
        ...(options.expiresAt === undefined ? {} : { expires_at: options.expiresAt }),
        ...defined({ project_id: options.project }),
        ...policyFields(options),
      };
      const created = await callAdminApi<CreatedKey>(context.connection(command), 'POST', gatewayOperations.createKey.path, body);
      print(context.output(command), created, () => showKey(created));
    },
  );

  pageOptions(
    keys
      .command('list')
      .description('list keys, newest first (a table; --json for the API answer)')
      .option('--owner <owner>', 'only this owner')
      .option('--status <status>', 'active, disabled or expired')
      .option('--metadata <name:value>', 'only keys with this metadata entry (exact match)'),
    'keys',
  ).action(async (options: { owner?: string; status?: string; metadata?: string; limit?: number; cursor?: string }, command: Command) => {
    const page = await callAdminApi<Schemas['KeyList']>(
      context.connection(command),
      'GET',
      withQuery(gatewayOperations.listKeys.path, {
        owner: options.owner,
        status: options.status,
        metadata: options.metadata,
        limit: options.limit,
        cursor: options.cursor,
      }),
    );
    printPage(context.output(command), page, [
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
  });

  policyOptions(
    keys
      .command('update')
      .description('change a key: name, owner, limits, providers, policy, expiry, or enable a disabled key')
      .argument('<id>', 'key id (key_...)')
      .option('--name <name>', 'new name')
      .option('--owner <owner>', 'new owner')
      .option('--rpm <n>', 'requests per minute', wholeNumber)
      .option('--providers <list>', 'allowed providers, comma-separated', providerList)
      .option('--expires-at <time>', 'new expiry (ISO 8601), or "never"', expiry)
      .option(
        '--project <id>',
        'move the key into this project (prj_...), or "none" to take it out of its project',
        orClear('none', (id: string) => id),
      )
      .option('--enable', 're-enable a disabled key')
      .option('--disable', 'disable the key'),
  ).action(
    async (
      id: string,
      options: PolicyOptions & {
        name?: string;
        owner?: string;
        rpm?: number;
        providers?: string[];
        expiresAt?: Clearable<string>;
        project?: Clearable<string>;
        enable?: boolean;
        disable?: boolean;
      },
      command: Command,
    ) => {
      const body: Schemas['UpdateKeyRequest'] = {
        ...defined({ name: options.name, owner: options.owner, rate_limit_rpm: options.rpm, expires_at: options.expiresAt, project_id: options.project }),
        ...(options.providers === undefined ? {} : { allowed_providers: options.providers as Schemas['UpdateKeyRequest']['allowed_providers'] }),
        ...policyFields(options),
        ...enableDisable(command, options, 'active'),
      };
      requireChange(command, body);
      const key = await callAdminApi<Key>(context.connection(command), 'PATCH', keyPath(id), body);
      print(context.output(command), key, () => showKey(key));
    },
  );

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
