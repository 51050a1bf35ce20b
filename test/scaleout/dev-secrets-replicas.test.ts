import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MAIN_JS } from '../helpers/gateway-process';

const CONFIG_JS = path.join(path.dirname(MAIN_JS), 'config/config.js');

/** One process loading the configuration of `db` with nothing configured: the secrets it ends up with. */
function secretsOf(db: string): Promise<string> {
  const script = `const { loadConfig } = require(${JSON.stringify(CONFIG_JS)});
const c = loadConfig({ DATABASE_URL: ${JSON.stringify(db)} }, () => undefined);
process.stdout.write(JSON.stringify([c.adminSecret, c.serviceTokens, c.channels.sealingKeys.map((k) => k.toString('hex')), c.images.signingKey]));`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { timeout: 30_000 }, (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}: ${stderr}`)) : resolve(stdout),
    );
  });
}

describe('secrets generated on a first start from one checkout', () => {
  it('replicas starting at the same moment all end up with the same admin secret, service token, sealing key and image key', async () => {
    for (let round = 0; round < 5; round += 1) {
      const db = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-dev-secrets-')), 'gateway.db');
      const seen = await Promise.all(Array.from({ length: 6 }, () => secretsOf(db)));
      expect(new Set(seen).size).toBe(1);
      expect(fs.readdirSync(path.dirname(db)).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    }
  });
});
