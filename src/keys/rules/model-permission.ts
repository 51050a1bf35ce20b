/**
 * Which catalog models a key may use: one whose provider the key allows (allowed_providers) and,
 * when the key lists its models (allowed_models), one of those; a key in a project is narrowed
 * further by the project's lists (never widened). Checked in TypeScript only: no statement decides it.
 */

export interface ModelPermissions {
  allowedProviders: readonly string[];
  /** null: every model of an allowed provider. */
  allowedModels: readonly string[] | null;
  /** The key's project's lists (null each: no narrowing); null for a key without a project. */
  project: { allowedProviders: readonly string[] | null; allowedModels: readonly string[] | null } | null;
}

export type ModelRefusal = 'model_not_allowed' | 'provider_not_allowed' | 'project_model_not_allowed' | 'project_provider_not_allowed';

/** Why the key may not use `entry`, or undefined when it may; the key's lists first, then its project's, model before provider. */
export function modelRefusal(key: ModelPermissions, entry: { model: string; provider: string }): ModelRefusal | undefined {
  if (key.allowedModels !== null && !key.allowedModels.includes(entry.model)) return 'model_not_allowed';
  if (!key.allowedProviders.includes(entry.provider)) return 'provider_not_allowed';
  const project = key.project;
  if (project === null) return undefined;
  if (project.allowedModels !== null && !project.allowedModels.includes(entry.model)) return 'project_model_not_allowed';
  if (project.allowedProviders !== null && !project.allowedProviders.includes(entry.provider)) return 'project_provider_not_allowed';
  return undefined;
}
