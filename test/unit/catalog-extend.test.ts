import { DEFAULT_CATALOG, extendCatalog } from '../../src/config/catalog';
import { catalogFromEnv } from '../../src/config/config';

/** MODEL_CATALOG's additive form (src/config/catalog.ts extendCatalog) and `creative-gateway catalog`'s reading of it. */
describe('MODEL_CATALOG as {"models": [...], "remove": [...]}: changes the built-in catalog', () => {
  const names = (catalog: Array<{ model: string }>) => catalog.map((entry) => entry.model);
  const builtIn = (model: string) => DEFAULT_CATALOG.find((entry) => entry.model === model)!;

  it('adds a model and keeps every built-in one', () => {
    const catalog = extendCatalog({ models: [{ model: 'cheap', provider: 'local', credits_per_image: 0, default_size: '64x64' }] });
    expect(names(catalog)).toEqual([...names(DEFAULT_CATALOG), 'cheap']);
    expect(catalog.find((entry) => entry.model === 'cheap')).toEqual({
      model: 'cheap',
      provider: 'local',
      upstream_model: 'cheap',
      credits_per_image: 0,
      default_size: '64x64',
    });
    for (const entry of DEFAULT_CATALOG) expect(catalog.find((e) => e.model === entry.model)).toEqual(entry);
  });

  it('merges the fields an entry gives over the built-in model of the same name', () => {
    const catalog = extendCatalog({ models: [{ model: 'jimeng-4.5', credits_per_image: 9 }] });
    expect(catalog.find((entry) => entry.model === 'jimeng-4.5')).toEqual({ ...builtIn('jimeng-4.5'), credits_per_image: 9 });
    expect(names(catalog)).toEqual(names(DEFAULT_CATALOG));
  });

  it("a new upstream_model brings its own size bounds, not the old model's", () => {
    const catalog = extendCatalog({ models: [{ model: 'local-1', upstream_model: 'my-local', default_size: '4096x4096' }] });
    const entry = catalog.find((e) => e.model === 'local-1')!;
    expect(entry.upstream_model).toBe('my-local');
    expect(entry.size_bounds).toBeUndefined();
  });

  it('removes the models it names', () => {
    const catalog = extendCatalog({ remove: ['jimeng-3.1', 'jimeng-4.0'] });
    expect(names(catalog)).toEqual(names(DEFAULT_CATALOG).filter((name) => name !== 'jimeng-3.1' && name !== 'jimeng-4.0'));
  });

  it.each([
    [{ remove: ['no-such-model'] }, /not in the built-in catalog/],
    [{ models: [{ model: 'local-1', credits_per_image: 1 }], remove: ['local-1'] }, /also in "remove"/],
    [{ model: 'x' }, /unknown field "model"/],
    [{ models: {} }, /"models" must be an array/],
    [{ models: [{ model: 'new-one', credits_per_image: 1 }] }, /"provider" must be a non-empty string/],
    [{ models: [{ model: 'jimeng-4.5', default_size: '16x16' }] }, /outside the model's size bounds/],
  ])('refuses %j with a readable message', (raw, message) => {
    expect(() => extendCatalog(raw)).toThrow(message);
  });

  it('catalogFromEnv: built in without MODEL_CATALOG, the array form replaces, the object form changes', () => {
    expect(catalogFromEnv({})).toEqual(DEFAULT_CATALOG);
    expect(names(catalogFromEnv({ MODEL_CATALOG: '[{"model":"only","provider":"local","credits_per_image":1,"default_size":"64x64"}]' }))).toEqual(['only']);
    expect(names(catalogFromEnv({ MODEL_CATALOG: '{"remove":["jimeng-3.1"]}' }))).not.toContain('jimeng-3.1');
    expect(() => catalogFromEnv({ MODEL_CATALOG: '{"remove":"jimeng-3.1"}' })).toThrow(/MODEL_CATALOG is invalid: "remove" must be an array/);
  });
});
