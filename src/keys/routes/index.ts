import { Router } from 'express';
import type { KeysService } from '../keys.service';
import { createKeyRouter } from './createKey.router';
import { disableKeyRouter } from './disableKey.router';
import { getKeyRouter } from './getKey.router';
import { listKeysRouter } from './listKeys.router';
import { rotateKeyRouter } from './rotateKey.router';
import { setKeyQuotaRouter } from './setKeyQuota.router';
import { updateKeyRouter } from './updateKey.router';

/** The /admin/keys operations, one router file per operationId. */
export function adminKeysRouter(keys: KeysService): Router {
  return Router().use(
    createKeyRouter(keys),
    listKeysRouter(keys),
    getKeyRouter(keys),
    updateKeyRouter(keys),
    disableKeyRouter(keys),
    setKeyQuotaRouter(keys),
    rotateKeyRouter(keys),
  );
}
