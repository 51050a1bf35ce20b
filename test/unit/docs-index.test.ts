import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(__dirname, '../..');
const docs = path.join(root, 'docs');

/** Every page under docs/, as a path relative to docs/. */
function pages(dir = docs): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) return pages(file);
    return entry.name.endsWith('.md') && file !== path.join(docs, 'README.md') ? [path.relative(docs, file).split(path.sep).join('/')] : [];
  });
}

/** docs/README.md is the index: it links every page, and every page it links exists. */
describe('the docs index (docs/README.md)', () => {
  const index = fs.readFileSync(path.join(docs, 'README.md'), 'utf8');
  const linked = [...index.matchAll(/\]\(([^)#]+\.md)(?:#[^)]*)?\)/g)].map((match) => match[1] as string);

  it('links every page under docs/', () => {
    expect(pages().filter((page) => !linked.includes(page))).toEqual([]);
  });

  it('links only pages that exist', () => {
    expect(linked.filter((page) => !fs.existsSync(path.join(docs, page)))).toEqual([]);
  });

  it('calls nothing pending with an issue number', () => {
    expect(index).not.toMatch(/pending|\(#\d+\)/i);
  });
});
