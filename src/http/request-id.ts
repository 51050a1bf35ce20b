import type { RequestHandler } from 'express';
import { newId } from '../shared/ids';

const SAFE_REQUEST_ID = /^[\w.:-]{1,128}$/;

/** Echoes a sane incoming X-Request-Id or makes one, so logs and error bodies can be matched. */
export const requestId: RequestHandler = (req, res, next) => {
  const incoming = req.get('x-request-id');
  const id = incoming && SAFE_REQUEST_ID.test(incoming) ? incoming : newId('req');
  res.locals.requestId = id;
  res.setHeader('X-Request-Id', id);
  next();
};
