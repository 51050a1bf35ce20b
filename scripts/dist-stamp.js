// Whether dist/ was built from the sources as they are: `npm run build` writes the stamp after tsc,
// and the test tiers that run dist/ (test/helpers/global-setup.js) build again only when it is stale.
// The stamp holds a hash of every file tsc reads for dist/ and main.js's mtime, so a build from other
// sources since (a `tsc` of another checkout state) is seen.
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
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

const stamp = () => `${sourcesHash()} ${fs.statSync(mainJs).mtimeMs}`;

function distIsCurrent() {
  try {
    return fs.readFileSync(stampFile, 'utf8') === stamp();
  } catch {
    return false; // no stamp or no dist/
  }
}

function writeDistStamp() {
  fs.writeFileSync(stampFile, stamp());
}

module.exports = { distIsCurrent, writeDistStamp };

if (require.main === module) writeDistStamp();
