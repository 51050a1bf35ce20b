import type { Request, Response } from 'express';
import { newId } from '../shared/ids';

const SAFE_REQUEST_ID = /^[\w.:-]{1,128}$/;

/** Echoes a sane incoming X-Request-Id or makes one, so logs and error bodies can be matched. */
export function assignRequestId(req: Request, res: Response): void {
  const incoming = req.get('x-request-id');
  const id = incoming && SAFE_REQUEST_ID.test(incoming) ? incoming : newId('req');
  res.locals.requestId = id;
  res.setHeader('X-Request-Id', id);
}
