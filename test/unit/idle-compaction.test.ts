import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { ConnectionGuard } from '../../src/http/connection-guard';
import { startIdleCompaction } from '../../src/maintenance/idle-compaction';

/** Runs the compaction loop against counters the test moves, and counts the collections it logs. */
function harness(busy: () => boolean) {
  let requests = 0;
  const collections: unknown[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void collections.push(JSON.parse(line)) });
  const stop = startIdleCompaction({ requestsStarted: () => requests, busy, idleMs: 300, minFreeBytes: 0, logger });
  return { request: () => (requests += 1), collections, stop };
}

const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('idle compaction', () => {
  it('collects once after requests stop, and not again while nothing happens', async () => {
    const h = harness(() => false);
    try {
      h.request();
      await wait(1200);
      expect(h.collections).toHaveLength(1);
      expect(h.collections[0]).toMatchObject({ msg: 'idle: heap compacted' });
      await wait(600);
      expect(h.collections).toHaveLength(1);
      h.request();
      await wait(1200);
      expect(h.collections).toHaveLength(2);
    } finally {
      h.stop();
    }
  });

  it('does nothing when no request came, or while one is in flight', async () => {
    const idle = harness(() => false);
    const inFlight = harness(() => true);
    try {
      inFlight.request();
      await wait(1200);
      expect(idle.collections).toHaveLength(0);
      expect(inFlight.collections).toHaveLength(0);
    } finally {
      idle.stop();
      inFlight.stop();
    }
  });

  it('health probes and metrics scrapes do not count as requests (a load balancer probing every few seconds would keep it from ever running)', async () => {
    const guard = new ConnectionGuard(100, pino({ level: 'silent' }));
    const server = http.createServer((_req, res) => res.end('ok'));
    guard.watch(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const path of ['/healthz', '/readyz', '/metrics']) await (await fetch(`${base}${path}`)).text();
      expect(guard.requestsStarted).toBe(0);
      await (await fetch(`${base}/images/generate`)).text();
      expect(guard.requestsStarted).toBe(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
