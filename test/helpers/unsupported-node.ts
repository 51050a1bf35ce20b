import { describeSkippedBecause } from './skip-reasons';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A Node.js older than the supported lines installed on this machine (the CI machine's own `node` is
 * 20; `npm install` puts Node 24 in node_modules/.bin, which npm scripts and the test tiers run on),
 * or undefined. Looked up on PATH outside node_modules, then in the usual system places.
 */
export function unsupportedNodeOnMachine(): { path: string; version: string } | undefined {
  const directories = [...(process.env.PATH ?? '').split(path.delimiter).filter((dir) => dir && !dir.includes('node_modules')), '/usr/bin', '/usr/local/bin'];
  for (const directory of new Set(directories)) {
    const candidate = path.join(directory, 'node');
    if (!fs.existsSync(candidate)) continue;
    let version: string;
    try {
      version = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
    } catch {
      continue;
    }
    if (Number(/^v(\d+)/.exec(version)?.[1]) < 22) return { path: candidate, version };
  }
  return undefined;
}

/** `describe` when this machine has an unsupported Node.js, else `describe.skip` with a warning. */
export function describeOnUnsupportedNode(what: string): jest.Describe {
  if (unsupportedNodeOnMachine()) return describe;
  const reason = `no Node.js older than 22 on this machine (the CI machine's own node is 20)`;
  console.warn(`Skipping ${what}: ${reason}`);
  return describeSkippedBecause(reason);
}
