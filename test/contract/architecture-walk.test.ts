import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { localRequest, startTestGateway, type TestGateway } from '../helpers/test-gateway';

// docs/maintainers/architecture.md walks a synchronous `POST /images/generate` module by module, each
// named once where the request first runs its code. This checks the walk against the code: every
// module it names exists and is named once, and every src module whose code runs while the gateway
// serves such a request (V8's precise coverage, in this process) is named in it.

const ROOT = path.resolve(__dirname, '../..');
const ARCHITECTURE = path.join(ROOT, 'docs/maintainers/architecture.md');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = `${dir}/${entry.name}`;
    return entry.isDirectory() ? sourceFiles(relative) : entry.name.endsWith('.ts') ? [relative] : [];
  });
}

/**
 * The modules the walk names, in order. A name may be a path from the root (`src/http/listeners.ts`),
 * or relative to the folder of the last full path named (`request-id.ts`, `jimeng/volc-signer.ts`);
 * else it must be the one src file of that name.
 */
function modulesNamedByWalk(): string[] {
  const text = fs.readFileSync(ARCHITECTURE, 'utf8');
  const start = text.indexOf("## A request's walk");
  const end = text.indexOf('\n## ', start + 1);
  const walk = text.slice(start, end === -1 ? undefined : end);
  const all = sourceFiles('src');
  let folder = 'src';
  return [...walk.matchAll(/`([^`\s]+\.ts)`/g)].map(([, name]) => {
    if (name!.startsWith('src/')) {
      folder = path.posix.dirname(name!);
      return name!;
    }
    const relative = path.posix.join(folder, name!);
    if (all.includes(relative)) return relative;
    const matches = all.filter((file) => file.endsWith(`/${name}`));
    return matches.length === 1 ? matches[0]! : `${name} (ambiguous or unknown: ${matches.join(', ') || 'no such file'})`;
  });
}

/** The src modules whose functions ran between two precise-coverage takes. */
async function modulesRunBy(session: Session, work: () => Promise<void>): Promise<string[]> {
  await session.post('Profiler.takePreciseCoverage');
  await work();
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const ran = new Set<string>();
  for (const script of result) {
    const file = script.url.startsWith('file://') ? new URL(script.url).pathname : script.url;
    if (!file.startsWith(path.join(ROOT, 'src') + path.sep)) continue;
    if (script.functions.some((fn) => fn.ranges.some((range) => range.count > 0))) ran.add(path.relative(ROOT, file));
  }
  return [...ran].sort();
}

describe("docs/maintainers/architecture.md's walk of POST /images/generate", () => {
  it('names modules that exist, each once', () => {
    const named = modulesNamedByWalk();
    expect(named.length).toBeGreaterThan(50);
    expect(named.filter((module) => !fs.existsSync(path.join(ROOT, module)))).toEqual([]);
    expect(named.filter((module, index) => named.indexOf(module) !== index)).toEqual([]);
  });

  describe('against the code a synchronous generation runs', () => {
    let t: TestGateway;
    let session: Session;
    beforeAll(async () => {
      // Background work on timers (the generation worker's and the webhook dispatcher's polls, the expiry
      // scan) is not the request's: set to run far less often than the test lasts.
      t = await startTestGateway({ GENERATION_POLL_MS: '600000', WEBHOOK_POLL_INTERVAL_MS: '600000', WEBHOOK_EXPIRY_SCAN_INTERVAL_MS: '86400000' });
      session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    });
    afterAll(async () => {
      await session.post('Profiler.stopPreciseCoverage');
      session.disconnect();
      await t.close();
    });

    it('names every src module the request runs (stored images answered by URL)', async () => {
      const { key } = await t.createKey();
      const generate = async () => {
        const res = await t.api.client(key, localRequest({ response_format: 'url' }));
        expect(res.status).toBe(200);
      };
      // The first request runs one-time paths (caches filled, statements prepared). Of the next two, what both
      // ran: a timer of some other work firing during one of them does not count.
      await generate();
      const first = await modulesRunBy(session, generate);
      const second = new Set(await modulesRunBy(session, generate));
      const ran = first.filter((module) => second.has(module));
      expect(ran.length).toBeGreaterThan(50);
      const named = new Set(modulesNamedByWalk());
      expect(ran.filter((module) => !named.has(module))).toEqual([]);
    });
  });
});
