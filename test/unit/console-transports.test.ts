import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { CHANNEL_TRANSPORTS } from '../../generated/channel-transports';
import { transportFacts } from '../../src/cli/commands/channels-transports';
import { FORMATS } from '../../src/providers/formats';

const root = path.resolve(__dirname, '../..');

/**
 * What the console's Add channel form offers (generated/channel-transports.ts, written by
 * scripts/channels-reference.mjs; `npm run check:gen` fails when stale) is the registry's every
 * transport that takes channels, as the spec lets a channel be created with.
 */
describe("the console's channel transports (generated/channel-transports.ts)", () => {
  it('are the registry transports that take channels, in its order, with their credential fields and default base URL', () => {
    expect(CHANNEL_TRANSPORTS.map((t) => t.transport)).toEqual(FORMATS.filter((d) => d.credentials !== undefined).map((d) => d.format));
    for (const facts of transportFacts(FORMATS)) {
      const offered = CHANNEL_TRANSPORTS.find((t) => t.transport === facts.transport);
      expect({
        transport: facts.transport,
        credentials: offered?.credentials,
        defaultBaseUrl: offered && 'defaultBaseUrl' in offered ? offered.defaultBaseUrl : undefined,
      }).toEqual({
        transport: facts.transport,
        credentials: facts.credentials.map(({ name, secret }) => ({ name, secret })),
        defaultBaseUrl: facts.defaultBaseUrl,
      });
    }
  });

  it("are exactly the spec's CreateChannelRequest transport enum", () => {
    const spec = YAML.parse(fs.readFileSync(path.join(root, 'openapi/gateway.yaml'), 'utf8'));
    const transports = spec.components.schemas.CreateChannelRequest.properties.transport.enum as string[];
    expect(CHANNEL_TRANSPORTS.map((t) => t.transport).sort()).toEqual([...transports].sort());
  });

  it('the Add channel form reads them rather than a list of its own', () => {
    const page = fs.readFileSync(path.join(root, 'console/src/pages/channels.tsx'), 'utf8');
    expect(page).toContain("from '../../../generated/channel-transports'");
    expect(page).not.toMatch(/\['(ark|visual|images-api)', '/);
  });
});
