import type { Response } from 'express';
import { AbortLink } from '../shared/abort-chain';

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

/** The root of the abort chain (abort-chain.ts): aborts with ClientDisconnected when the client goes away before its response is written. */
export function abortOnDisconnect(res: Response): AbortSignal {
  const client = new AbortLink(undefined);
  res.on('close', () => {
    if (!res.writableFinished) client.abort(new ClientDisconnected());
  });
  return client.signal;
}
