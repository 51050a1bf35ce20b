import type { EnvVariables } from '../config/env-types';
import type { PriceRow } from '../config/price-table';
import type { Price } from '../pricing/price';
import type { ErrorRule } from './error-table';
import type { UpstreamModelSpec } from './model-spec';
import type { WireClient } from './provider';

/**
 * What one upstream wire format is, in one place: everything the gateway (config, channels, failover,
 * charges, the task journal, /v1/models, the registry) needs to know about it asks its descriptor,
 * never the format's name. A new provider is a folder with its descriptor, its client and its model
 * table, and one line in formats.ts (docs/maintainers/adding-a-provider.md).
 */
export interface ProviderDescriptor {
  /** The wire format's name: a channel's `transport`, a catalog entry's `transport`. */
  format: string;
  /** What it speaks, for help texts and docs. */
  title: string;
  /** Provider names it serves without configuration (a key's `allowed_providers`), and the default transport of the first. */
  providers: readonly string[];
  /** The fields of its channels' `credentials`; undefined for a format that has no API channels (`local`). */
  credentials?: CredentialShape;
  /** The environment variables of its environment account; undefined when it has none. */
  environment?: EnvironmentAccountSpec;
  /** Base URL of its public endpoint; channels without one must give `base_url`. */
  defaultBaseUrl?: string;
  /**
   * Serves the providers the operator names (OPENAI_COMPAT_PROVIDER_NAME, catalog entries): the
   * format of a provider no descriptor lists. One format at most.
   */
  generic?: true;
  /** Upstream calls one request of `n` images costs: one per image, or one for all n. */
  calls: 'one-per-image' | 'one-for-n';
  /** Sends nothing upstream (the built-in renderer): a cancel or a disconnect costs nothing, a takeover simply runs it again. */
  offline?: true;
  /**
   * The hosts its documentation says its result URLs are on, over https (`*.` matches subdomains), besides
   * the account's own base URL's host: its providers' images are downloaded from these only, plus what the
   * operator adds (IMAGE_FETCH_ALLOWED_HOSTS for every provider, PROVIDER_<NAME>_IMAGE_HOSTS for one).
   */
  resultHosts: readonly string[];
  /** Its models: sizes, parameters, input limits (docs/operators/providers.md lists them with sources). */
  models: readonly UpstreamModelSpec[];
  /**
   * The models the built-in catalog lists for it (src/config/catalog.ts DEFAULT_CATALOG, in registry
   * order): they serve once the operator adds an account (a channel); the catalog adds each row's
   * documented size bounds and input limits from `models`.
   */
  catalog?: readonly DefaultCatalogRow[];
  /**
   * The upstream ids it serves beyond its table's rows, for a provider with several formats: which
   * one a trusted caller's model outside the catalog goes to (the first format, in registry order, that matches).
   */
  modelIds?: RegExp;
  /** Its error table: which upstream codes mean what (error-table.ts); the first matching row wins. */
  errors: readonly ErrorRule[];
  /** How a takeover resumes an accepted task; undefined when its calls answer at once (nothing to resume). */
  resume?: ResumeHandleSpec;
  /** Its client for one account. */
  createClient(account: WireAccount, settings: WireSettings): WireClient;
}

/** A built-in catalog model of a format (config/catalog.ts CatalogModel without what the model table gives). */
export interface DefaultCatalogRow {
  model: string;
  provider: string;
  upstream_model: string;
  /** Credits per image, for a model with no upstream price in money (`price` instead where there is one). */
  credits_per_image?: number;
  /** The upstream's price in its own money, with its source (src/pricing/price.ts); credits follow from CREDITS_PER_USD. */
  price?: Price;
  default_size: string;
  /** Needed when its provider has several formats. */
  transport?: string;
  price_table?: PriceRow[];
}

export interface CredentialField {
  name: string;
  /** Sealed at rest and never shown; only a hint of the hint field is. */
  secret: boolean;
}

export interface CredentialShape {
  fields: readonly CredentialField[];
  /** The field whose first and last characters tell accounts apart in `credentials_hint`. */
  hintField: string;
}

/**
 * The environment variables of a format's environment account. The account exists when its
 * credential variables are set (all of them, and the base URL when it has no default: else
 * startup fails naming them).
 */
export interface EnvironmentAccountSpec {
  /** Per credential field, the variable holding it. */
  credentials: Readonly<Record<string, string>>;
  /** The variable holding the base URL (its default is the descriptor's `defaultBaseUrl`); none for a format without upstream. */
  baseUrl?: string;
  /** The variable naming the provider it serves, when the operator names it (else the first of `providers`). */
  providerName?: string;
  /** Other variables its account reads (for messages). */
  settings?: readonly string[];
  /** The stable id of its environment channel; by default derived from the provider's name. */
  channelId?: string;
  /**
   * The declarations of the variables above (type, default, description, secrecy: `declareVariable`),
   * which the configuration schema and its reference take as they are. A base URL variable's default
   * is the descriptor's `defaultBaseUrl`.
   */
  variables: EnvVariables;
}

/** An account on an upstream: where it is and how it signs in (credential fields as the descriptor names them). */
export interface WireAccount {
  format: string;
  provider: string;
  baseUrl?: string;
  credentials?: Readonly<Record<string, string>>;
}

/** An account configured by environment variables: served as a read-only channel of this id. */
export interface EnvironmentAccount extends WireAccount {
  channelId: string;
  baseUrl?: string;
}

export interface WireSettings {
  /** How often an accepted task is polled. */
  pollIntervalMs: number;
  /** Connect to public addresses only (API channels unless CHANNEL_ALLOW_PRIVATE_UPSTREAMS). */
  publicOnly: boolean;
  /** `tiny`: the local renderer answers a fixed 1x1 PNG (benchmarks). */
  localMode?: 'render' | 'tiny';
}

/**
 * The resume handle of an accepted task: an opaque string stored by the task journal
 * (`generation_tasks.task_id`, text) and handed back to the client as `resumeTaskId`. A format whose
 * handle is more than an id (a polling URL, a region) encodes it into that string itself.
 */
export interface ResumeHandleSpec {
  /** What the handle holds, for docs (`task id`, `polling URL`). */
  holds: string;
  /** How long the upstream keeps a task: a takeover finding an older one fails it instead of polling. */
  lifeMs?: number;
}

/** Upstream calls a request of `n` images costs on `descriptor`, for a model row `spec` of its table (if it has one). */
export function callsFor(descriptor: Pick<ProviderDescriptor, 'calls'>, n: number, spec?: Pick<UpstreamModelSpec, 'max_images_per_call'>): number {
  if (descriptor.calls === 'one-per-image') return n;
  return spec?.max_images_per_call === undefined ? 1 : Math.ceil(n / spec.max_images_per_call);
}

/** The credentials of `account`, required by a format that signs its calls. */
export function credentialsOf(account: WireAccount, descriptor: Pick<ProviderDescriptor, 'format' | 'credentials'>): Readonly<Record<string, string>> {
  const fields = descriptor.credentials?.fields ?? [];
  const credentials = account.credentials ?? {};
  const missing = fields.filter((field) => typeof credentials[field.name] !== 'string');
  if (missing.length > 0) throw new Error(`${descriptor.format} channels need ${fields.map((f) => f.name).join(' and ')}`);
  return credentials;
}

/** Where an API-key account is and how it signs in, as the API-key formats' clients take it. */
export interface ApiKeyConnection {
  provider: string;
  baseUrl: string;
  apiKey: string;
  publicOnly: boolean;
}

/** The connection of an account of a format whose one credential is `api_key`. */
export function apiKeyConnection(
  account: WireAccount,
  descriptor: Pick<ProviderDescriptor, 'format' | 'credentials'>,
  settings: Pick<WireSettings, 'publicOnly'>,
): ApiKeyConnection {
  const credentials = credentialsOf(account, descriptor);
  return { provider: account.provider, baseUrl: account.baseUrl as string, apiKey: credentials.api_key as string, publicOnly: settings.publicOnly };
}
