// Global setup of the tiers that start gateway processes from dist/ (processes, conformance): builds
// dist/ (`tsc -p tsconfig.build.json`, as `npm run build`) unless it was built from the same sources
// already, as when `npm test` runs the conformance tier after the processes tier, and the console
// (dist/console, as `npm run build`) when its sources changed. Unit and integration tests run the
// TypeScript sources in-process and never build; the browser tier builds only the console
// (global-setup-console.js).
const { execFileSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const { buildConsoleIfStale } = require('./global-setup-console');

const root = path.resolve(__dirname, '../..');
const stampFile = path.join(root, 'dist/.test-build-stamp');
const mainJs = path.join(root, 'dist/src/main.js');

/** Every file tsc reads for dist/ (tsconfig.build.json's include, its configs) and tsc's version. */
function sourcesHash() {
  const hash = createHash('sha256');
  const walk = (dir) => {
    if (!fs.existsSync(dir)) return;
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else hash.update(path.relative(root, file)).update(fs.readFileSync(file));
    }
  };
  for (const dir of ['src', 'generated', 'test/fakes']) walk(path.join(root, dir));
  for (const file of ['tsconfig.json', 'tsconfig.build.json', 'node_modules/typescript/package.json']) hash.update(fs.readFileSync(path.join(root, file)));
  return hash.digest('hex');
}

module.exports = async () => {
  buildConsoleIfStale();
  const sources = sourcesHash();
  // The stamp also holds main.js's mtime: a build from other sources since (`npm run build`) is seen.
  const current = () => `${sources} ${fs.statSync(mainJs).mtimeMs}`;
  try {
    if (fs.readFileSync(stampFile, 'utf8') === current()) return;
  } catch {
    // No stamp or no dist/: build.
  }
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  fs.writeFileSync(stampFile, current());
};
