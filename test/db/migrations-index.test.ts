import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { migrationSources, migrations } from '../../src/db/migrations';

const folder = join(__dirname, '../../src/db/migrations');
const files = readdirSync(folder)
  .filter((file) => file !== 'index.ts')
  .sort();

describe('migrations index', () => {
  it('holds only NNNN_name.ts files besides the index', () => {
    for (const file of files) expect(file).toMatch(/^\d{4}_[a-z0-9_]+\.ts$/);
  });

  it('lists every file of the folder, in order, under its file name', () => {
    const names = migrationSources.map(([name]) => name);
    expect(names).toEqual(files.map((file) => file.replace(/\.ts$/, '')));
    expect([...names].sort()).toEqual(names);
  });

  it('takes each migration from the file it is named after', () => {
    for (const [name, source] of migrationSources) {
      const file = require(join(folder, name)) as { migration: unknown };
      expect(source).toBe(file.migration);
    }
  });

  it.each(['sqlite', 'postgres'] as const)('builds the record in order for %s', (engine) => {
    const record = migrations(engine);
    expect(Object.keys(record)).toEqual(migrationSources.map(([name]) => name));
    for (const migration of Object.values(record)) expect(typeof migration.up).toBe('function');
  });
});
