import { createHash, createHmac } from 'node:crypto';

/**
 * Volcengine OpenAPI request signing (HMAC-SHA256, like AWS SigV4 but with no prefix on the
 * signing key chain and the terminal scope "request").
 */
export interface VolcCredentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface SignableRequest {
  method: string;
  host: string;
  path: string;
  query: Record<string, string>;
  body: string;
  contentType: string;
  /** Injected in tests; defaults to now. */
  date?: Date;
}

const sha256Hex = (data: string) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding, as the canonical query string needs. */
function uriEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * The canonical query string (keys sorted, RFC 3986 encoded: a space is `%20`, not `+`). The URL
 * sent must carry exactly this string: the server checks the signature against what it received.
 */
export function canonicalQueryString(query: Record<string, string>): string {
  return Object.keys(query)
    .sort()
    .map((name) => `${uriEncode(name)}=${uriEncode(query[name] as string)}`)
    .join('&');
}

export function volcDate(date: Date): string {
  return date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

/** Returns the headers to send (fetch adds Host itself, from the same URL the signature used). */
export function signVolcRequest(request: SignableRequest, credentials: VolcCredentials, region = 'cn-north-1', service = 'cv'): Record<string, string> {
  const xDate = volcDate(request.date ?? new Date());
  const shortDate = xDate.slice(0, 8);
  const payloadHash = sha256Hex(request.body);
  const headers: Record<string, string> = {
    'content-type': request.contentType,
    host: request.host,
    'x-content-sha256': payloadHash,
    'x-date': xDate,
  };
  const signedHeaders = Object.keys(headers).sort();
  const canonicalQuery = canonicalQueryString(request.query);
  const canonicalRequest = [
    request.method.toUpperCase(),
    request.path,
    canonicalQuery,
    signedHeaders.map((name) => `${name}:${(headers[name] as string).trim()}\n`).join(''),
    signedHeaders.join(';'),
    payloadHash,
  ].join('\n');
  const scope = `${shortDate}/${region}/${service}/request`;
  const stringToSign = ['HMAC-SHA256', xDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(credentials.secretAccessKey, shortDate), region), service), 'request');
  const signature = createHmac('sha256', signingKey).update(stringToSign).digest('hex');
  return {
    'Content-Type': request.contentType,
    'X-Date': xDate,
    'X-Content-Sha256': payloadHash,
    Authorization: `HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders.join(';')}, Signature=${signature}`,
  };
}
