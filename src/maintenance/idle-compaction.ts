import v8 from 'node:v8';
import vm from 'node:vm';
import type { Logger } from 'pino';

/**
 * Gives memory back once a burst is over. Under load V8 grows its old generation (requests in flight
 * survive young-generation collections and are promoted), and it keeps those pages committed long after
 * they are empty: measured, 219 MB RSS right after the upstream benchmark and still 219 MB 30 s later,
 * with 40 MB of the old generation in use (docs/benchmarks-history.md, "Memory and slow generations, round 2"). V8's own memory reducer did not
 * shrink it. One full collection once the gateway has been idle hands the empty pages back.
 *
 * Idle means: no request has started for `idleMs` and none is in flight (`busy()`). At most one
 * collection per idle period, and only when the heap holds at least `minFreeBytes` more than it uses,
 * so a gateway that is idle and already small is never collected again and again.
 */
export interface IdleCompactionOptions {
  /** Requests started so far (any monotonic counter that moves when a request arrives). */
  requestsStarted: () => number;
  /** True while any request is being read or answered. */
  busy: () => boolean;
  idleMs: number;
  minFreeBytes: number;
  logger: Logger;
}

let collect: (() => void) | undefined;

/** V8's full collection, through a context created after --expose-gc is set (the main context has no `gc`). */
function fullCollection(): () => void {
  if (!collect) {
    v8.setFlagsFromString('--expose-gc');
    collect = vm.runInNewContext('gc') as () => void;
  }
  return collect;
}

export function startIdleCompaction(options: IdleCompactionOptions): () => void {
  let seen = options.requestsStarted();
  let quietSince = Date.now();
  let dirty = false;
  const timer = setInterval(
    () => {
      const started = options.requestsStarted();
      const now = Date.now();
      if (started !== seen) {
        seen = started;
        quietSince = now;
        dirty = true;
        return;
      }
      if (!dirty || now - quietSince < options.idleMs || options.busy()) return;
      dirty = false;
      const before = process.memoryUsage();
      if (before.heapTotal - before.heapUsed < options.minFreeBytes) return;
      fullCollection()();
      const after = process.memoryUsage();
      options.logger.debug(
        { heap_total_mb: Math.round(after.heapTotal / 2 ** 20), freed_mb: Math.round((before.heapTotal - after.heapTotal) / 2 ** 20), ms: Date.now() - now },
        'idle: heap compacted',
      );
    },
    Math.max(250, Math.floor(options.idleMs / 2)),
  );
  timer.unref();
  return () => clearInterval(timer);
}
