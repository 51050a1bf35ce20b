import type { Response } from 'express';

/** Why a request's work was aborted: its client went away before the response was written. */
export class ClientDisconnected extends Error {
  constructor() {
    super('client disconnected');
    this.name = 'ClientDisconnected';
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
