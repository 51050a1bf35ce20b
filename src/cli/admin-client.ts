import fs from 'node:fs';
import path from 'node:path';
import type { components } from '../../generated/gateway';

/** The gateway answered with an error: its status, code and message reach the operator as they are. */
export class ApiCallError extends Error {}

/** Something the operator must fix in how the CLI is invoked or set up (exit 2). */
export class UsageError extends Error {}

export interface AdminConnection {
  url: string;
  /** The bearer credential: a scoped admin token (hyadm_...) or the admin secret. */
  adminSecret: string;
}

/**
 * GATEWAY_URL / --url, and the credential: ADMIN_TOKEN (a scoped admin token, hyadm_...) when set,
 * else ADMIN_SECRET, else the secret `npm start` stored in ./data/admin-secret.
 */
export function adminConnection(url: string | undefined): AdminConnection {
  const base = (url ?? process.env.GATEWAY_URL ?? 'http://localhost:8080').replace(/\/$/, '');
  if (process.env.ADMIN_TOKEN) return { url: base, adminSecret: process.env.ADMIN_TOKEN };
  if (process.env.ADMIN_SECRET) return { url: base, adminSecret: process.env.ADMIN_SECRET };
  const file = path.resolve('data/admin-secret');
  if (fs.existsSync(file)) return { url: base, adminSecret: fs.readFileSync(file, 'utf8').trim() };
  throw new UsageError('Set ADMIN_TOKEN or ADMIN_SECRET (or run from the directory where `npm start` created data/admin-secret).');
}

/** Sends one admin API call; a failure to reach the gateway is ApiCallError. */
async function send(connection: AdminConnection, method: string, route: string, body: unknown, accept?: string): Promise<Response> {
  try {
    return await fetch(`${connection.url}${route}`, {
      method,
      headers: {
        Authorization: `Bearer ${connection.adminSecret}`,
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
        ...(accept === undefined ? {} : { Accept: accept }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new ApiCallError(`cannot reach the gateway at ${connection.url}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
  }
}

/** The API's error answer as ApiCallError, with its own code and message. */
function refusal(connection: AdminConnection, response: Response, text: string): ApiCallError {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return new ApiCallError(`${response.status}: the gateway at ${connection.url} answered something that is not JSON`);
  }
  const error = (json as Partial<components['schemas']['Error']>).error;
  return new ApiCallError(error ? `${response.status} ${error.code}: ${error.message}` : `${response.status}: ${text.slice(0, 200)}`);
}

/** One admin API call; the parsed JSON body (undefined for 204), or ApiCallError with the API's own message. */
export async function callAdminApi<T>(connection: AdminConnection, method: string, route: string, body?: unknown): Promise<T> {
  const response = await send(connection, method, route, body);
  const text = await response.text();
  if (response.status === 204) return undefined as T;
  if (!response.ok) throw refusal(connection, response, text);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new ApiCallError(`${response.status}: the gateway at ${connection.url} answered something that is not JSON`);
  }
}

/** A GET answered as text in `accept` (e.g. text/csv), with the response headers. */
export async function callAdminApiText(connection: AdminConnection, route: string, accept: string): Promise<{ text: string; headers: Headers }> {
  const response = await send(connection, 'GET', route, undefined, accept);
  const text = await response.text();
  if (!response.ok) throw refusal(connection, response, text);
  return { text, headers: response.headers };
}
