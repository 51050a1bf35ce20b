import fs from 'node:fs';
import path from 'node:path';
import { CONFIG_REFERENCE_PATH, renderConfigReference } from '../../src/config/config-reference';

describe('configuration reference', () => {
  it('the committed docs/operators/configuration-reference.md is what the schema generates (npm run gen)', () => {
    const committed = fs.readFileSync(path.resolve(__dirname, '../..', CONFIG_REFERENCE_PATH), 'utf8');
    expect(committed).toBe(renderConfigReference());
  });

  it('has one row per variable, secrets marked', () => {
    const reference = renderConfigReference();
    expect(reference).toContain('| `PORT` | `8080` | HTTP port | no |');
    expect(reference).toMatch(/^\| `ADMIN_SECRET` \| generated outside production \| .* \| yes \|$/m);
    expect(reference).toMatch(/^\| `PROVIDER_<NAME>_MAX_ATTEMPTS` \| `3` \| /m);
  });
});
