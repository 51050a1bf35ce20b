import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/**
 * Stored idempotent responses are sealed with AES-256-GCM under a key derived from the server
 * secret and the caller's Idempotency-Key. A first response may hold a new API key's secret
 * (POST /admin/keys); sealed, the database never holds it readable, yet a retry can replay it.
 */
function sealingKey(serverSecret: string, scope: string, idempotencyKey: string): Buffer {
  return createHmac('sha256', serverSecret).update(`idempotency\u0000${scope}\u0000${idempotencyKey}`).digest();
}

export function sealResponse(text: string, serverSecret: string, scope: string, idempotencyKey: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(serverSecret, scope, idempotencyKey), iv);
  const sealed = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64');
}

export function openResponse(stored: string, serverSecret: string, scope: string, idempotencyKey: string): string {
  const raw = Buffer.from(stored, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', sealingKey(serverSecret, scope, idempotencyKey), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
