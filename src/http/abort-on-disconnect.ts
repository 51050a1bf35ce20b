import type { Response } from 'express';

/** Why a request's work was aborted: its client went away before the response was written. */
export class ClientDisconnected extends Error {
  /** Set once the generation the request ran is settled: its id and the credits charged for what had been sent upstream. */
  readonly generation?: { generationId: string; chargedCredits: number };

  constructor(generation?: { generationId: string; chargedCredits: number }) {
    super('client disconnected');
    this.name = 'ClientDisconnected';
    if (generation) this.generation = generation;
  }
}

/** A signal that aborts (with ClientDisconnected) when the client goes away before its response is written. */
export function abortOnDisconnect(res: Response): AbortSignal {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort(new ClientDisconnected());
  });
  return controller.signal;
}
