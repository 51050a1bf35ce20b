import fs from 'node:fs';
import path from 'node:path';
import type { GatewayProcess } from '../helpers/gateway-process';
import { PastingShell, startFreshCloneGateway } from '../helpers/pasting-shell';

const ROOT = path.resolve(__dirname, '../..');
const WALK_THROUGH_HEADING = '\n## Walk-through with curl\n';

/** The README's ```sh blocks from the walk-through's heading to the end, in order, as a reader pastes them. */
function walkThroughBlocks(): string[] {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const from = readme.indexOf(WALK_THROUGH_HEADING);
  if (from < 0) throw new Error(`README.md has no "${WALK_THROUGH_HEADING.trim()}" section`);
  return [...readme.slice(from).matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

/** What each block is there to show: the HTTP status of each of its curl calls, in order, and what it prints. */
const EXPECTED: Array<{ what: string; codes: number[]; shows: RegExp[] }> = [
  {
    what: 'a key, an image, 429 with Retry-After, a higher limit, 402 with the refill time, the key re-quota-ed',
    codes: [201, 200, 429, 200, 402, 200, 200],
    shows: [
      /credits_remaining: 2/,
      /^HTTP\/1\.1 429 /m,
      /^Retry-After: \d+/im,
      /"code":"rate_limited"/,
      /"code":"quota_exceeded"/,
      /"period_resets_at":"\d{4}-/,
      /"credits_quota":100,"credits_used":0/,
    ],
  },
  { what: 'a signed URL, fetched without the key', codes: [200, 200], shows: [] },
  { what: 'image inputs: an img_ id and a data: URI', codes: [200], shows: [/"credits_charged":1/] },
  {
    what: 'rotation refuses the old secret, disabling refuses the key',
    codes: [200, 401, 200, 200, 401],
    shows: [/"code":"invalid_api_key"/, /^200$/m, /"status":"disabled"/, /"code":"key_disabled"/],
  },
];

/**
 * Issue #39 §14, §23: the README's walk-through pasted block by block into one shell, in a fresh directory
 * holding only `node_modules`, against a gateway started there as a newcomer starts it (secrets generated
 * into ./data). Each block must succeed and show what it is there to show; the blocks write only under
 * `data/`. The blocks come from README.md itself, with `localhost:8080` replaced by the test gateway's address.
 */
describe("the README's walk-through, pasted in order", () => {
  const blocks = walkThroughBlocks();
  let directory: string;
  let tools: string;
  let codesFile: string;
  let gateway: GatewayProcess;
  let shell: PastingShell;

  beforeAll(async () => {
    ({ directory, tools, codesFile, gateway } = await startFreshCloneGateway('cgw-readme'));
    shell = new PastingShell(directory, {
      // The project's Node 24 for the node one-liners, whatever the machine's own node is; then the recording curl.
      PATH: [path.join(ROOT, 'node_modules/.bin'), tools, process.env.PATH].join(':'),
      HOME: directory,
      CURL_CODES: codesFile,
    });
  }, 60_000);

  afterAll(async () => {
    await shell?.close();
    await gateway?.stop();
    for (const made of [directory, tools]) if (made) fs.rmSync(made, { recursive: true, force: true });
  });

  it('has the blocks this test knows what to expect of', () => {
    expect(blocks).toHaveLength(EXPECTED.length);
  });

  EXPECTED.forEach((expected, index) => {
    it(`block ${index + 1}: ${expected.what}`, async () => {
      const block = blocks[index];
      if (block === undefined) throw new Error(`README.md has no walk-through block ${index + 1}`);
      const file = path.join(tools, `block-${index + 1}.sh`);
      const pasted = block.replaceAll('localhost:8080', new URL(gateway.url).host);
      // Any other address would reach past the test gateway: the walk-through says localhost:8080 throughout.
      expect(pasted).not.toMatch(/localhost|127\.0\.0\.1:8080/);
      fs.writeFileSync(file, pasted);
      fs.writeFileSync(codesFile, '');
      const { status, output } = await shell.paste(file);
      const codes = fs.readFileSync(codesFile, 'utf8').split('\n').filter(Boolean).map(Number);
      // The output rides along so that a failure shows what the reader would have seen.
      expect({ status, codes, output }).toEqual({ status: 0, codes: expected.codes, output: expect.any(String) });
      for (const shown of expected.shows) expect(output).toMatch(shown);
    }, 60_000);
  });

  it('writes only under data/ (ignored by git), and the images it saved are PNGs', () => {
    expect(fs.readdirSync(directory).sort()).toEqual(['data', 'node_modules']);
    const ignored = fs.readFileSync(path.join(ROOT, '.gitignore'), 'utf8').split('\n');
    expect(ignored).toContain('data/');
    // The key's secret is readable by its owner only, whatever the umask.
    expect(fs.statSync(path.join(directory, 'data', 'key.json')).mode & 0o777).toBe(0o600);
    for (const image of ['out.png', 'harbour.png']) {
      expect(
        fs
          .readFileSync(path.join(directory, 'data', image))
          .subarray(1, 4)
          .toString(),
      ).toBe('PNG');
    }
  });
});
