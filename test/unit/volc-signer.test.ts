import { createHash, createHmac } from 'node:crypto';
import { signedVisualRequest } from '../../src/providers/jimeng/visual-transport';
import { canonicalQueryString, signVolcRequest } from '../../src/providers/jimeng/volc-signer';
import { expectedVolcSignature } from '../fakes/volc-signature';

describe('Volcengine request signing', () => {
  const credentials = { accessKeyId: 'AKLTtestkey', secretAccessKey: 'WkRFd1pXTTVNVEk9' };
  const body = '{"req_key":"jimeng_t2i_v40","prompt":"a cat"}';
  const date = new Date('2026-11-22T18:30:05.123Z');
  const request = {
    method: 'POST',
    host: 'visual.volcengineapi.com',
    path: '/',
    query: { Version: '2022-08-31', Action: 'CVSync2AsyncSubmitTask' },
    body,
    contentType: 'application/json',
    date,
  };

  it('derives the documented signature, computed here by hand step by step', () => {
    const headers = signVolcRequest(request, credentials);
    expect(headers['X-Date']).toBe('20261122T183005Z');
    const bodyHash = createHash('sha256').update(body).digest('hex');
    expect(headers['X-Content-Sha256']).toBe(bodyHash);
    // 1. Canonical request: sorted query, sorted lowercase signed headers, each line + "\n", then a blank line.
    const canonical = [
      'POST',
      '/',
      'Action=CVSync2AsyncSubmitTask&Version=2022-08-31',
      `content-type:application/json\nhost:visual.volcengineapi.com\nx-content-sha256:${bodyHash}\nx-date:20261122T183005Z\n`,
      'content-type;host;x-content-sha256;x-date',
      bodyHash,
    ].join('\n');
    // 2. String to sign with the scope date/region/service/request.
    const toSign = `HMAC-SHA256\n20261122T183005Z\n20261122/cn-north-1/cv/request\n${createHash('sha256').update(canonical).digest('hex')}`;
    // 3. Signing key: HMAC chain from the raw secret (no "AWS4"-style prefix).
    const kDate = createHmac('sha256', credentials.secretAccessKey).update('20261122').digest();
    const kRegion = createHmac('sha256', kDate).update('cn-north-1').digest();
    const kService = createHmac('sha256', kRegion).update('cv').digest();
    const kSigning = createHmac('sha256', kService).update('request').digest();
    const signature = createHmac('sha256', kSigning).update(toSign).digest('hex');
    expect(headers.Authorization).toBe(
      `HMAC-SHA256 Credential=AKLTtestkey/20261122/cn-north-1/cv/request, SignedHeaders=content-type;host;x-content-sha256;x-date, Signature=${signature}`,
    );
  });

  it('agrees with the fake upstream verifier, and any change to body or secret breaks it', () => {
    const headers = signVolcRequest(request, credentials);
    const verify = (secret: string, sentBody: string) =>
      expectedVolcSignature({
        secretAccessKey: secret,
        method: 'POST',
        path: '/',
        query: 'Action=CVSync2AsyncSubmitTask&Version=2022-08-31',
        headers: {
          'content-type': 'application/json',
          host: 'visual.volcengineapi.com',
          'x-content-sha256': headers['X-Content-Sha256']!,
          'x-date': headers['X-Date']!,
        },
        signedHeaders: ['content-type', 'host', 'x-content-sha256', 'x-date'],
        body: sentBody,
        xDate: headers['X-Date']!,
        region: 'cn-north-1',
        service: 'cv',
      });
    const signature = /Signature=([0-9a-f]+)$/.exec(headers.Authorization!)![1];
    expect(verify(credentials.secretAccessKey, body)).toBe(signature);
    expect(verify('other-secret', body)).not.toBe(signature);
    expect(verify(credentials.secretAccessKey, `${body} `)).not.toBe(signature);
  });

  it('sends the query exactly as it signed it: a space is %20 in both (URLSearchParams would send +)', () => {
    const query = { Action: 'CVSync2AsyncSubmitTask', Version: '2022-08-31', Note: "a b~c*d!e'(f)+g" };
    const { url, headers } = signedVisualRequest('https://visual.volcengineapi.com', query, body, credentials, new Date('2026-11-22T10:00:00Z'));
    const sent = new URL(url).search.slice(1);
    expect(sent).toBe(canonicalQueryString(query));
    expect(sent).toBe('Action=CVSync2AsyncSubmitTask&Note=a%20b~c%2Ad%21e%27%28f%29%2Bg&Version=2022-08-31');
    // The server checks the signature against the query it received.
    const signature = /Signature=([0-9a-f]+)$/.exec(headers.Authorization!)![1];
    expect(
      expectedVolcSignature({
        secretAccessKey: credentials.secretAccessKey,
        method: 'POST',
        path: '/',
        query: sent,
        headers: {
          'content-type': 'application/json',
          host: 'visual.volcengineapi.com',
          'x-content-sha256': headers['X-Content-Sha256']!,
          'x-date': headers['X-Date']!,
        },
        signedHeaders: ['content-type', 'host', 'x-content-sha256', 'x-date'],
        body,
        xDate: headers['X-Date']!,
        region: 'cn-north-1',
        service: 'cv',
      }),
    ).toBe(signature);
  });
});
