/**
 * Why a run stopped: the holder lost its lease (taken over, or settled elsewhere, e.g. canceled).
 * Thrown wherever a lease is found gone: the worker's renewal and cancel (as its run's abort reason),
 * the task journal's send mark, and the runner's fallback record; each of them writes under the lease.
 */
export class LeaseLost extends Error {
  constructor(
    readonly generationId: string,
    readonly canceled: boolean,
  ) {
    super(canceled ? `generation ${generationId} was canceled` : `generation ${generationId} is no longer held by this process`);
    this.name = 'LeaseLost';
  }
}
