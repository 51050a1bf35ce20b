/**
 * One link of a request's abort chain. A generation's work listens to one signal, made of links that
 * each abort with a named reason or with the reason of the link above them, whichever comes first:
 *
 *   client      `ClientDisconnected`  the waiting client went away (src/http/abort-on-disconnect.ts)
 *   run         `LeaseLost`           the row's lease lapsed, or the generation was canceled (generation-worker.ts)
 *   request     `provider_timeout`    the provider's deadline for the whole request (channel-failover.ts)
 *   attempt     `provider_timeout`    one channel's shorter deadline for its call (channel-failover.ts)
 *
 * A link forwards its parent's abort with one listener, not `AbortSignal.any`, which allocates a signal
 * following every source through weak references: several µs and a share of each request's garbage.
 * Whoever makes a link releases it when its work is done, so the parent's signal does not keep it.
 */
export class AbortLink {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly forward: (() => void) | undefined;
  private expired = false;

  constructor(
    private readonly parent: AbortSignal | undefined,
    deadline?: { ms: number; reason: () => unknown },
  ) {
    if (parent?.aborted) this.controller.abort(parent.reason);
    else if (parent) {
      this.forward = () => this.controller.abort(parent.reason);
      parent.addEventListener('abort', this.forward, { once: true });
    }
    if (deadline && !this.controller.signal.aborted) {
      this.timer = setTimeout(() => {
        this.expired = true;
        this.controller.abort(deadline.reason());
      }, deadline.ms);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Aborts this link (and the links below it) with `reason`. */
  abort(reason: unknown): void {
    this.controller.abort(reason);
  }

  /** This link's own deadline passed while the links above it still ran: the failure is its timeout, whatever the call threw. */
  get timedOut(): boolean {
    return this.expired && !(this.parent?.aborted ?? false);
  }

  /** Stops the deadline and unhooks from the parent. */
  release(): void {
    clearTimeout(this.timer);
    if (this.forward) this.parent?.removeEventListener('abort', this.forward);
  }
}
