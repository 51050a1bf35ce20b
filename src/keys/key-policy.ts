import { creditPriceOf } from '../pricing/catalog-prices';
import type { components } from '../../generated/gateway';
import { type CatalogModel, fallbackChain, type InputImageLimits } from '../config/catalog';
import type { ApiKeysTable } from '../db/schema';
import { ApiError } from '../errors/api-error';
import { modelNotFound, unknownModelMessage } from '../errors/unknown-model';
import { effectiveInputLimits } from '../images/inputs/input-limits';
import { modelSpecOfEntry } from '../providers/formats';
import { maxPromptChars } from '../providers/model-spec';
import { CidrSet, parseCidr } from '../shared/cidr';
import type { ConcurrencyLeases, HeldLease } from './concurrency-leases';
import { type ModelPermissions, modelRefusal } from './rules/model-permission';
import { CompiledPromptRules, mergePromptRules, type PromptRuleSet, promptRefusalMessage, validatePromptRules } from '../guardrails/prompt-rules';
import { type ClientProject, projectConcurrencyLimited, projectDisabled } from '../projects/project-policy';

/**
 * Per-key policy beyond quota and rate (issue #16): where a key may be used from, which models,
 * how many generations at once, its metadata and alert thresholds. Checks refuse before anything
 * is charged.
 */

type Schemas = components['schemas'];
export type KeyMetadata = Schemas['KeyMetadata'];
/** A catalog model as a key sees it; whether it can serve now (`status`) the channels add. */
export type OpenAIModel = Omit<Schemas['OpenAIModel'], 'status'>;

export const DEFAULT_ALERT_THRESHOLDS = [80, 100];

/** The policy fields of a create or update request (undefined = not given). */
export interface PolicyInput {
  max_concurrent?: number | null;
  allowed_ips?: string[] | null;
  allowed_models?: string[] | null;
  metadata?: KeyMetadata;
  alert_thresholds?: number[];
  prompt_rules?: Schemas['PromptRule'][] | null;
}

type PolicyColumns = Pick<ApiKeysTable, 'max_concurrent' | 'allowed_ips' | 'allowed_models' | 'metadata' | 'alert_thresholds' | 'prompt_rules'>;

/** Checks policy input against the catalog and turns it into column values (only the fields given). */
export function policyColumns(input: PolicyInput, catalog: ReadonlyMap<string, CatalogModel>): Partial<PolicyColumns> {
  const columns: Partial<PolicyColumns> = {};
  if (input.max_concurrent !== undefined) columns.max_concurrent = input.max_concurrent;
  if (input.allowed_ips !== undefined) {
    const bad = (input.allowed_ips ?? []).filter((entry) => parseCidr(entry) === undefined);
    if (bad.length > 0) throw new ApiError('invalid_request', `Not an IP address or CIDR: ${bad.join(', ')}.`, { param: 'allowed_ips' });
    columns.allowed_ips = input.allowed_ips === null ? null : JSON.stringify(input.allowed_ips.map((entry) => entry.trim()));
  }
  if (input.allowed_models !== undefined) {
    const unknown = (input.allowed_models ?? []).filter((model) => !catalog.has(model));
    if (unknown.length > 0) {
      throw new ApiError('invalid_request', unknownModelMessage(unknown, catalog), { param: 'allowed_models' });
    }
    columns.allowed_models = input.allowed_models === null ? null : JSON.stringify(input.allowed_models);
  }
  if (input.metadata !== undefined) columns.metadata = JSON.stringify(input.metadata);
  if (input.alert_thresholds !== undefined) columns.alert_thresholds = JSON.stringify([...input.alert_thresholds].sort((a, b) => a - b));
  if (input.prompt_rules !== undefined) columns.prompt_rules = input.prompt_rules === null ? null : storedPromptRules(input.prompt_rules);
  return columns;
}

/** Columns of a new key: the given policy over the defaults. */
export function newKeyPolicyColumns(input: PolicyInput, catalog: ReadonlyMap<string, CatalogModel>): PolicyColumns {
  return {
    max_concurrent: null,
    allowed_ips: null,
    allowed_models: null,
    metadata: '{}',
    alert_thresholds: JSON.stringify(DEFAULT_ALERT_THRESHOLDS),
    prompt_rules: null,
    ...policyColumns(input, catalog),
  };
}

function parseJson<T>(value: string | null, fallback: T): T {
  return value === null ? fallback : (JSON.parse(value) as T);
}

/** The policy as the Key resource shows it. */
export function policyResource(
  row: PolicyColumns,
): Pick<Schemas['Key'], 'max_concurrent' | 'allowed_ips' | 'allowed_models' | 'metadata' | 'alert_thresholds' | 'prompt_rules'> {
  return {
    max_concurrent: row.max_concurrent,
    allowed_ips: parseJson<string[] | null>(row.allowed_ips, null),
    allowed_models: parseJson<string[] | null>(row.allowed_models, null),
    // PostgreSQL (jsonb) answers an object, SQLite (text) a string.
    metadata: typeof row.metadata === 'string' ? (JSON.parse(row.metadata) as KeyMetadata) : row.metadata,
    alert_thresholds: parseJson<number[]>(row.alert_thresholds, DEFAULT_ALERT_THRESHOLDS),
    prompt_rules: parseJson<Schemas['PromptRule'][] | null>(row.prompt_rules ?? null, null),
  };
}

/** The policy an authenticated client key carries through a request. */
export interface ClientKeyPolicy {
  readonly maxConcurrent: number | null;
  readonly allowedIps: readonly string[] | null;
  readonly allowedModels: readonly string[] | null;
  readonly alertThresholds: readonly number[];
  /** The key's prompt rules with its project's, compiled once per read of its row; null = none. */
  readonly promptRules: CompiledPromptRules | null;
}

/** The fields of a ClientKey (key.model.ts) the checks below read; named here so this module need not import key.model, which imports it. */
type PolicyHolder = { id: string; allowedProviders: readonly string[]; policy: ClientKeyPolicy; project?: ClientProject | null };

/** The policy a key's requests carry; `projectRules`: its project's prompt rules, which the key's own add to. */
export function clientKeyPolicy(row: PolicyColumns, projectRules: PromptRuleSet | null = null): ClientKeyPolicy {
  const resource = policyResource(row);
  return {
    maxConcurrent: resource.max_concurrent,
    allowedIps: resource.allowed_ips,
    allowedModels: resource.allowed_models,
    alertThresholds: resource.alert_thresholds,
    promptRules: effectivePromptRules(resource.prompt_rules as PromptRuleSet | null, projectRules),
  };
}

/**
 * A rule set as an admin sets it on a key or a project, checked and stored (JSON, every rule with its
 * id); 400 invalid_request naming the first field at fault.
 */
export function storedPromptRules(input: unknown): string {
  const checked = validatePromptRules(input);
  if (!checked.ok)
    throw new ApiError('invalid_request', checked.errors.map((e) => `${e.param}: ${e.message}`).join('; '), {
      param: checked.errors[0]?.param ?? 'prompt_rules',
    });
  return JSON.stringify(checked.rules);
}

/**
 * The prompt rules a key's requests are checked against, compiled once per read of its row: its
 * project's with its own added (mergePromptRules); null when neither has any.
 */
export function effectivePromptRules(keyRules: PromptRuleSet | null, projectRules: PromptRuleSet | null): CompiledPromptRules | null {
  if (keyRules === null && projectRules === null) return null;
  return new CompiledPromptRules(projectRules === null ? keyRules! : mergePromptRules(projectRules, keyRules ?? []));
}

/** 400 prompt_blocked when the key's prompt rules (its project's included) refuse the prompt: names the rule, never the text that matched. */
export function checkPromptRules(policy: Pick<ClientKeyPolicy, 'promptRules'>, prompt: string): void {
  const verdict = policy.promptRules?.check(prompt);
  if (verdict && !verdict.allowed) {
    throw new ApiError('prompt_blocked', promptRefusalMessage(verdict), { param: 'prompt' });
  }
}

/** 403 ip_not_allowed when the key has an address list and the client is outside it. */
export function checkClientIp(policy: Pick<ClientKeyPolicy, 'allowedIps'>, clientIp: string): void {
  if (policy.allowedIps === null) return;
  if (!CidrSet.of(policy.allowedIps).has(clientIp)) {
    throw new ApiError('ip_not_allowed', `This key may not be used from ${clientIp || 'an unknown address'}.`);
  }
}

/** The key's model permissions (rules/model-permission.ts). */
function permissionsOf(key: Pick<PolicyHolder, 'policy' | 'allowedProviders' | 'project'>): ModelPermissions {
  return { allowedProviders: key.allowedProviders, allowedModels: key.policy.allowedModels, project: key.project ?? null };
}

/**
 * 403 model_not_allowed when the key lists its models and this one is not among them, else 403
 * provider_not_allowed when the key may not use its provider; then, for a key in a project, 403
 * project_disabled, project_model_not_allowed or project_provider_not_allowed (the project narrows).
 */
export function checkModelPermitted(key: Pick<PolicyHolder, 'policy' | 'allowedProviders' | 'project'>, entry: CatalogModel): void {
  const refusal = modelRefusal(permissionsOf(key), entry);
  if (refusal === 'model_not_allowed') {
    throw new ApiError('model_not_allowed', `This key may not use model ${entry.model} (allowed: ${(key.policy.allowedModels ?? []).join(', ')}).`, {
      param: 'model',
    });
  }
  if (refusal === 'provider_not_allowed') {
    throw new ApiError(
      'provider_not_allowed',
      `Model ${entry.model} is served by provider ${entry.provider}; this key's allowed_providers are ${key.allowedProviders.join(', ')}. An admin can add ${entry.provider} to the key's allowed_providers.`,
      { param: 'model' },
    );
  }
  const project = key.project ?? null;
  if (project === null) return;
  if (project.status !== 'active') throw projectDisabled(project.id);
  if (refusal === 'project_model_not_allowed') {
    throw new ApiError(
      'project_model_not_allowed',
      `This key's project may not use model ${entry.model} (allowed: ${(project.allowedModels ?? []).join(', ')}).`,
      { param: 'model' },
    );
  }
  if (refusal === 'project_provider_not_allowed') {
    throw new ApiError(
      'project_provider_not_allowed',
      `This key's project may not use provider ${entry.provider} (allowed: ${(project.allowedProviders ?? []).join(', ')}).`,
      { param: 'model' },
    );
  }
}

/** Whether the key may use `entry` (checkModelPermitted without the refusal). */
export function mayUse(key: Pick<PolicyHolder, 'policy' | 'allowedProviders' | 'project'>, entry: CatalogModel): boolean {
  return modelRefusal(permissionsOf(key), entry) === undefined;
}

function openAiModel(
  key: Pick<PolicyHolder, 'policy' | 'allowedProviders' | 'project'>,
  catalog: ReadonlyMap<string, CatalogModel>,
  entry: CatalogModel,
): OpenAIModel {
  // The chain a request of this key continues on: only the models it may use.
  const fallbacks = fallbackChain(entry, catalog)
    .filter((next) => mayUse(key, next))
    .map((next) => next.model);
  return {
    id: entry.model,
    object: 'model',
    created: 0,
    owned_by: entry.provider,
    default_size: entry.default_size,
    credits_per_image: entry.credits_per_image,
    ...(entry.price_table ? { price_table: entry.price_table.map((row) => ({ ...row })) } : {}),
    ...(entry.price ? { price: entry.price } : {}),
    credit_price: creditPriceOf(entry),
    ...(entry.size_bounds ? { size_bounds: entry.size_bounds } : {}),
    // What the intake takes: the model's own limits within the gateway's (a 50 MB upstream limit is 15 MiB here).
    ...(entry.input_limits ? { input_limits: publishedInputLimits(entry.input_limits) } : {}),
    max_prompt_chars: maxPromptChars(modelSpecOfEntry(entry)),
    ...(fallbacks.length > 0 ? { fallbacks } : {}),
  };
}

function publishedInputLimits(limits: InputImageLimits): OpenAIModel['input_limits'] {
  const effective = effectiveInputLimits(limits);
  return { ...effective, formats: [...effective.formats] };
}

/** `GET /v1/models`: the catalog models this key may use. */
export function modelsForKey(key: Pick<PolicyHolder, 'policy' | 'allowedProviders' | 'project'>, catalog: ReadonlyMap<string, CatalogModel>): OpenAIModel[] {
  return [...catalog.values()].filter((entry) => mayUse(key, entry)).map((entry) => openAiModel(key, catalog, entry));
}

/** `GET /v1/models/{model}`: 404 for a model the catalog lacks, 403 for one this key may not use. */
export function modelForKey(
  key: Pick<PolicyHolder, 'policy' | 'allowedProviders' | 'project'>,
  catalog: ReadonlyMap<string, CatalogModel>,
  model: string,
): OpenAIModel {
  const entry = catalog.get(model);
  if (!entry) throw modelNotFound(model, catalog);
  if (!mayUse(key, entry)) throw new ApiError('model_not_allowed', `This key may not use model ${model}.`, { param: 'model' });
  return openAiModel(key, catalog, entry);
}

/**
 * Takes a slot of the key's `max_concurrent`, then of its project's (none needed without a cap);
 * 429 concurrency_limited or project_concurrency_limited when all are taken (a refused request holds none).
 */
export async function holdConcurrencySlot(
  leases: ConcurrencyLeases | undefined,
  key: Pick<PolicyHolder, 'id' | 'policy' | 'project'>,
): Promise<HeldLease | undefined> {
  if (!leases) return undefined;
  const max = key.policy.maxConcurrent;
  let keySlot: HeldLease | undefined;
  if (max !== null) {
    keySlot = await leases.acquire(key.id, max);
    if (!keySlot) {
      throw new ApiError('concurrency_limited', `This key already has ${max} generations in flight (its max_concurrent); retry when one finishes.`, {
        headers: { 'Retry-After': '1' },
      });
    }
  }
  const project = key.project ?? null;
  if (project === null || project.maxConcurrent === null) return keySlot;
  // The lease store's scopes are named by owner id; project ids (prj_) never meet key ids (key_).
  const projectSlot = await leases.acquire(project.id, project.maxConcurrent).catch(async (error: unknown) => {
    await keySlot?.release();
    throw error;
  });
  if (!projectSlot) {
    await keySlot?.release();
    throw projectConcurrencyLimited(project);
  }
  if (!keySlot) return projectSlot;
  const held = keySlot;
  return { release: async () => void (await Promise.all([held.release(), projectSlot.release()])) };
}
