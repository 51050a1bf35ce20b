import { readFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const read = (file: string) => JSON.parse(readFileSync(path.join(root, file), 'utf8'));

describe('install scripts', () => {
  // npm 11 names every dependency whose install script no `allowScripts` entry covers, after every
  // install; each is reviewed here instead (true: it runs, false: it is skipped).
  it("every dependency with an install script in the lock file is reviewed in package.json's allowScripts", () => {
    const lock = read('package-lock.json') as { packages: Record<string, { hasInstallScript?: boolean }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([location, entry]) => location !== '' && entry.hasInstallScript)
      .map(([location]) => location.slice(location.lastIndexOf('node_modules/') + 'node_modules/'.length));
    const reviewed = Object.keys((read('package.json') as { allowScripts: Record<string, boolean> }).allowScripts);
    expect([...new Set(withScripts)].filter((name) => !reviewed.includes(name))).toEqual([]);
  });
});
