import type { components } from '../../generated/gateway';
import type { CatalogModel } from '../config/catalog';
import type { GatewayConfig } from '../config/config';
import type { ChannelsTable } from '../db/schema';
import { defaultFormatOf, descriptorOf, FORMATS } from '../providers/formats';
import { toIso, toIsoOrNull } from '../shared/clock';

type Schemas = components['schemas'];
export type ChannelResource = Schemas['Channel'];
export type ChannelTransport = ChannelResource['transport'];
export type ChannelStatus = Schemas['ChannelStatus'];
export type ChannelModelEntry = ChannelResource['models'][number];
/** A channel's credential fields, as its format's descriptor names them. */
export type ChannelCredentials = Readonly<Record<string, string>>;

/** A channel as the router uses it: from the database (`api`) or from environment variables. */
export interface Channel {
  id: string;
  name: string;
  provider: string;
  transport: ChannelTransport;
  baseUrl: string | null;
  models: ChannelModelEntry[];
  priority: number;
  weight: number;
  status: ChannelStatus;
  disabledReason: string | null;
  disabledAt: number | null;
  maxConcurrency: number | null;
  rpm: number | null;
  ipm: number | null;
  timeoutMs: number;
  credentialsHint: string | null;
  source: 'api' | 'environment';
  createdAt: number;
  updatedAt: number;
}

/** Each format's public endpoint, from its descriptor (formats without one need `base_url`). */
export const DEFAULT_BASE_URLS: Partial<Record<ChannelTransport, string>> = Object.fromEntries(
  FORMATS.flatMap((descriptor) => (descriptor.defaultBaseUrl === undefined ? [] : [[descriptor.format, descriptor.defaultBaseUrl]])),
);

export function parseModels(text: string): ChannelModelEntry[] {
  return JSON.parse(text) as ChannelModelEntry[];
}

export function channelFromRow(row: ChannelsTable): Channel {
  return {
    id: row.id,
    name: row.name,
    provider: row.provider,
    transport: row.transport as ChannelTransport,
    baseUrl: row.base_url,
    models: parseModels(row.models),
    priority: row.priority,
    weight: row.weight,
    status: row.status as ChannelStatus,
    disabledReason: row.disabled_reason,
    disabledAt: row.disabled_at,
    maxConcurrency: row.max_concurrency,
    rpm: row.rpm,
    ipm: row.ipm,
    timeoutMs: row.timeout_ms,
    credentialsHint: row.credentials_hint,
    source: 'api',
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function toChannelResource(channel: Channel): ChannelResource {
  return {
    id: channel.id,
    name: channel.name,
    provider: channel.provider,
    transport: channel.transport,
    base_url: channel.baseUrl,
    models: channel.models.map((m) => ({ model: m.model, upstream_model: m.upstream_model ?? null })),
    priority: channel.priority,
    weight: channel.weight,
    status: channel.status,
    disabled_reason: channel.disabledReason,
    disabled_at: toIsoOrNull(channel.disabledAt),
    max_concurrency: channel.maxConcurrency,
    rpm: channel.rpm,
    ipm: channel.ipm,
    timeout_ms: channel.timeoutMs,
    credentials_hint: channel.credentialsHint,
    source: channel.source,
    created_at: toIso(channel.createdAt),
    updated_at: toIso(channel.updatedAt),
  };
}

/** A few characters of a secret, enough to tell accounts apart: `abcd...wxyz`. */
export function secretHint(secret: string): string {
  return secret.length <= 12 ? `${secret.slice(0, 2)}...` : `${secret.slice(0, 4)}...${secret.slice(-4)}`;
}

/** The hint of the field the transport's descriptor shows (credentials_hint). */
export function credentialsHint(transport: string, credentials: ChannelCredentials): string {
  const field = descriptorOf(transport)?.credentials?.hintField;
  return secretHint((field === undefined ? undefined : credentials[field]) ?? '');
}

/** Whether `channel` serves catalog `entry`: listed by the channel (environment channels: any of their transport). */
export function servesModel(channel: Channel, entry: CatalogModel): boolean {
  if (channel.provider !== entry.provider) return false;
  if (channel.source === 'environment') return (entry.transport ?? defaultTransport(entry.provider)) === channel.transport;
  return channel.models.some((m) => m.model === entry.model);
}

/** The format of a provider's catalog entries without `transport` (formats.ts); none for a provider with several. */
function defaultTransport(provider: string): ChannelTransport | undefined {
  return defaultFormatOf(provider)?.format as ChannelTransport | undefined;
}

/**
 * Today's environment-configured accounts, as read-only channels: ids are stable across
 * restarts and replicas. Their concurrency cap is per process (PROVIDER_<NAME>_MAX_CONCURRENCY).
 */
export function environmentChannels(config: GatewayConfig, startedAt: number): Channel[] {
  const { providers, catalog } = config;
  const modelsOf = (provider: string, transport: ChannelTransport) =>
    catalog
      .filter((m) => m.provider === provider && (m.transport ?? defaultTransport(provider)) === transport)
      .map((m) => ({ model: m.model, upstream_model: null }));
  const resilienceOf = (provider: string) => providers.resilience[provider] ?? providers.defaultResilience;
  const base = (id: string, provider: string, transport: ChannelTransport, baseUrl: string | null, hint: string | null): Channel => ({
    id,
    name: `${provider === transport ? provider : `${provider} ${transport}`} (environment)`,
    provider,
    transport,
    baseUrl,
    models: modelsOf(provider, transport),
    priority: 0,
    weight: 1,
    status: 'enabled',
    disabledReason: null,
    disabledAt: null,
    maxConcurrency: resilienceOf(provider).maxConcurrent,
    rpm: null,
    ipm: null,
    timeoutMs: resilienceOf(provider).timeoutMs,
    credentialsHint: hint,
    source: 'environment',
    createdAt: startedAt,
    updatedAt: startedAt,
  });
  const channels = [base('chn_envLocal', 'local', 'local', null, null)];
  for (const account of providers.accounts) {
    const hintField = descriptorOf(account.format)?.credentials?.hintField;
    const hinted = hintField === undefined ? undefined : account.credentials?.[hintField];
    channels.push(
      base(account.channelId, account.provider, account.format as ChannelTransport, account.baseUrl ?? null, hinted === undefined ? null : secretHint(hinted)),
    );
  }
  return channels;
}

/** What the environment variables of an environment channel are, for messages. */
export function environmentVariablesOf(channel: Pick<Channel, 'transport'>): string {
  return environmentVariableList(channel.transport).join(', ');
}

/** Its format's environment variables: the credentials', then the base URL's (or its settings' when it has neither). */
export function environmentVariableList(transport: string): string[] {
  const environment = descriptorOf(transport)?.environment;
  if (!environment) return [];
  const variables = [...Object.values(environment.credentials), ...(environment.baseUrl === undefined ? [] : [environment.baseUrl])];
  return variables.length > 0 ? variables : [...(environment.settings ?? [])];
}
