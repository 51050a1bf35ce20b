import crypto from 'node:crypto';

/**
 * An independent implementation of Volcengine's documented HMAC-SHA256 request signature,
 * written out step by step for the fake upstream and the signer's unit test. It shares no code
 * with src/providers/jimeng/volc-signer.ts on purpose.
 */
export function expectedVolcSignature(input: {
  secretAccessKey: string;
  method: string;
  path: string;
  query: string; // raw query string as sent
  headers: Record<string, string>; // lowercase names
  signedHeaders: string[]; // as listed in Authorization
  body: string;
  xDate: string;
  region: string;
  service: string;
}): string {
  const sortedQuery = input.query
    .split('&')
    .filter(Boolean)
    .map((pair) => pair.split('='))
    .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0))
    .map((pair) => pair.join('='))
    .join('&');
  let canonicalHeaders = '';
  for (const name of input.signedHeaders) canonicalHeaders += `${name}:${(input.headers[name] ?? '').trim()}\n`;
  const bodyHash = crypto.createHash('sha256').update(input.body, 'utf8').digest('hex');
  const canonicalRequest = `${input.method}\n${input.path}\n${sortedQuery}\n${canonicalHeaders}\n${input.signedHeaders.join(';')}\n${bodyHash}`;
  const day = input.xDate.substring(0, 8);
  const scope = `${day}/${input.region}/${input.service}/request`;
  const stringToSign = `HMAC-SHA256\n${input.xDate}\n${scope}\n${crypto.createHash('sha256').update(canonicalRequest, 'utf8').digest('hex')}`;
  let key: Buffer = crypto.createHmac('sha256', input.secretAccessKey).update(day).digest();
  key = crypto.createHmac('sha256', key).update(input.region).digest();
  key = crypto.createHmac('sha256', key).update(input.service).digest();
  key = crypto.createHmac('sha256', key).update('request').digest();
  return crypto.createHmac('sha256', key).update(stringToSign).digest('hex');
}
