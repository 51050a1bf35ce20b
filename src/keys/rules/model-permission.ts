/**
 * Which catalog models a key may use: one whose provider the key allows (allowed_providers) and,
 * when the key lists its models (allowed_models), one of those. Checked in TypeScript only: no
 * statement decides it.
 */

export interface ModelPermissions {
  allowedProviders: readonly string[];
  /** null: every model of an allowed provider. */
  allowedModels: readonly string[] | null;
}

/** Why the key may not use `entry`, or undefined when it may; the model list is checked first. */
export function modelRefusal(key: ModelPermissions, entry: { model: string; provider: string }): 'model_not_allowed' | 'provider_not_allowed' | undefined {
  if (key.allowedModels !== null && !key.allowedModels.includes(entry.model)) return 'model_not_allowed';
  if (!key.allowedProviders.includes(entry.provider)) return 'provider_not_allowed';
  return undefined;
}
