import fc from 'fast-check';
import type { CatalogModel } from '../../src/config/catalog';
import { ApiError } from '../../src/errors/api-error';
import { type ClientKeyPolicy, checkModelPermitted, modelForKey, modelsForKey } from '../../src/keys/key-policy';
import { modelRefusal } from '../../src/keys/rules/model-permission';

/**
 * Model permission (src/keys/rules/model-permission.ts) has one form, TypeScript; its callers
 * (generation admission, GET /v1/models and /v1/models/{model}) must all answer as it does.
 */

const PROVIDERS = ['local', 'jimeng', 'openai'];
const MODELS = ['m1', 'm2', 'm3', 'm4', 'm5'];

const catalogArb = fc
  .uniqueArray(fc.record({ model: fc.constantFrom(...MODELS), provider: fc.constantFrom(...PROVIDERS) }), { selector: (entry) => entry.model, minLength: 1 })
  .map(
    (entries) =>
      new Map(
        entries.map((entry): [string, CatalogModel] => [
          entry.model,
          { ...entry, upstream_model: entry.model, credits_per_image: 1, default_size: '1024x1024' },
        ]),
      ),
  );

const keyArb = fc.record({
  allowedProviders: fc.uniqueArray(fc.constantFrom(...PROVIDERS), { minLength: 1 }),
  allowedModels: fc.option(fc.uniqueArray(fc.constantFrom(...MODELS)), { nil: null }),
  // A project narrows the key's lists (each null: no narrowing).
  project: fc.option(
    fc.record({
      allowedProviders: fc.option(fc.uniqueArray(fc.constantFrom(...PROVIDERS), { minLength: 1 }), { nil: null }),
      allowedModels: fc.option(fc.uniqueArray(fc.constantFrom(...MODELS), { minLength: 1 }), { nil: null }),
    }),
    { nil: null },
  ),
});

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    if (error instanceof ApiError) return error.code;
    throw error;
  }
}

describe('model permission: every caller answers as the rule does', () => {
  it('admission, the model list and the model lookup', () => {
    fc.assert(
      fc.property(catalogArb, keyArb, (catalog, permissions) => {
        const policy: ClientKeyPolicy = {
          maxConcurrent: null,
          allowedIps: null,
          allowedModels: permissions.allowedModels,
          alertThresholds: [],
          promptRules: null,
        };
        const project =
          permissions.project === null
            ? null
            : { id: 'prj_1', status: 'active', rateLimitRpm: null, maxConcurrent: null, promptRules: null, moderationHook: null, ...permissions.project };
        const key = { id: 'key_1', allowedProviders: permissions.allowedProviders, policy, project };
        const listed = new Set(modelsForKey(key, catalog).map((model) => model.id));
        for (const entry of catalog.values()) {
          const refusal = modelRefusal(permissions, entry);
          expect(codeOf(() => checkModelPermitted(key, entry))).toBe(refusal);
          expect(listed.has(entry.model)).toBe(refusal === undefined);
          // Never widened: what the project allows, the key alone allows too.
          if (refusal === undefined) expect(modelRefusal({ ...permissions, project: null }, entry)).toBeUndefined();
          expect(codeOf(() => modelForKey(key, catalog, entry.model))).toBe(refusal === undefined ? undefined : 'model_not_allowed');
        }
      }),
      { numRuns: 500 },
    );
  });
});
