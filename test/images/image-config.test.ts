import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config/config';
import { imageHostsByProvider } from '../../src/images/create-images';
import { sniffImageType } from '../../src/images/image-bytes';
import { HostAllowList } from '../../src/images/image-fetch';

const quiet = () => undefined;
const dir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-image-config-'));
const base = () => ({ ADMIN_SECRET: 'a-long-enough-secret', DATABASE_URL: path.join(dir(), 'gw.db') });

describe('image settings', () => {
  it('zero configuration: ./data/images beside the database, 7 days, a signing key generated once (0600) and reused', () => {
    const env = base();
    const printed: string[] = [];
    const first = loadConfig(env, (line) => printed.push(line));
    expect(first.images).toMatchObject({
      store: { kind: 'directory', directory: path.join(path.dirname(env.DATABASE_URL), 'images') },
      retentionMs: 7 * 86_400_000,
    });
    const file = path.join(path.dirname(env.DATABASE_URL), 'image-url-key');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(first.images.signingKey.length).toBeGreaterThanOrEqual(32);
    expect(printed.join('\n')).toContain('image URL signing key');
    expect(loadConfig(env, quiet).images.signingKey).toBe(first.images.signingKey);
  });

  it('S3 settings, path-style by default with an endpoint', () => {
    const config = loadConfig(
      {
        ...base(),
        IMAGE_STORE: 's3',
        IMAGE_S3_BUCKET: 'imgs',
        IMAGE_S3_ENDPOINT: 'http://minio:9000',
        IMAGE_S3_ACCESS_KEY_ID: 'a',
        IMAGE_S3_SECRET_ACCESS_KEY: 'b',
        IMAGE_RETENTION_HOURS: '24',
      },
      quiet,
    );
    expect(config.images).toMatchObject({
      store: {
        kind: 's3',
        bucket: 'imgs',
        prefix: 'images/',
        region: 'us-east-1',
        endpoint: 'http://minio:9000',
        forcePathStyle: true,
        credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      },
      retentionMs: 86_400_000,
    });
  });

  it.each([
    [{ IMAGE_STORE: 'ftp' }, /IMAGE_STORE must be directory or s3/],
    [{ IMAGE_STORE: 's3' }, /needs IMAGE_S3_BUCKET/],
    [{ IMAGE_STORE: 's3', IMAGE_S3_BUCKET: 'b', IMAGE_S3_ACCESS_KEY_ID: 'only-one' }, /set both IMAGE_S3_ACCESS_KEY_ID and IMAGE_S3_SECRET_ACCESS_KEY/],
    [{ IMAGE_URL_SIGNING_KEY: 'short' }, /at least 32 characters/],
    [{ IMAGE_RETENTION_HOURS: '0' }, /IMAGE_RETENTION_HOURS must be an integer/],
    [{ PUBLIC_BASE_URL: 'ftp://x' }, /PUBLIC_BASE_URL must be an http\(s\) URL/],
  ])('fails fast for %j', (env, message) => {
    expect(() => loadConfig({ ...base(), ...env }, quiet)).toThrow(message);
  });

  it('production requires IMAGE_URL_SIGNING_KEY (replicas must share it)', () => {
    const production = {
      ...base(),
      NODE_ENV: 'production',
      CF_ACCESS_CLIENT_ID: 'svc',
      CF_ACCESS_CLIENT_SECRET: 'a-long-enough-service-secret',
      CHANNEL_SEALING_KEY: 'ab'.repeat(32),
    };
    expect(() => loadConfig(production, quiet)).toThrow(/IMAGE_URL_SIGNING_KEY is required/);
    expect(loadConfig({ ...production, IMAGE_URL_SIGNING_KEY: 'k'.repeat(32) }, quiet).images.signingKey).toBe('k'.repeat(32));
  });

  it("admits jimeng's documented image hosts: Ark's TOS buckets (volces.com) and the visual API's byteimg.com", () => {
    const hosts = imageHostsByProvider(loadConfig(base(), quiet));
    expect(hosts.get('jimeng')?.allows('p3-aiop-sign.byteimg.com')).toBe(true);
    expect(hosts.get('jimeng')?.allows('p26-aiop-sign.byteimg.com')).toBe(true);
    expect(hosts.get('jimeng')?.allows('ark-content-generation-v2-cn-beijing.tos-cn-beijing.volces.com')).toBe(true);
    expect(hosts.get('jimeng')?.allows('byteimg.com.evil.example')).toBe(false);
  });

  it("each provider may be fetched from its own base URL's host plus the operator's list", () => {
    const config = loadConfig(
      {
        ...base(),
        ARK_API_KEY: 'k',
        ARK_BASE_URL: 'https://ark.example.net/api/v3',
        OPENAI_COMPAT_BASE_URL: 'http://10.0.0.5:9000/v1',
        OPENAI_COMPAT_API_KEY: 'k',
        IMAGE_FETCH_ALLOWED_HOSTS: '*.cdn.example.org',
      },
      quiet,
    );
    const hosts = imageHostsByProvider(config);
    expect(hosts.get('jimeng')?.allows('ark.example.net')).toBe(true);
    expect(hosts.get('jimeng')?.allows('10.0.0.5:9000')).toBe(false);
    expect(hosts.get('openai-compatible')?.allows('10.0.0.5:9000')).toBe(true);
    expect(hosts.get('openai-compatible')?.allows('img.cdn.example.org')).toBe(true);
    expect(hosts.get('local')?.allows('ark.example.net')).toBe(false);
  });

  it("each provider's documented result hosts are its own, https only; PROVIDER_<NAME>_IMAGE_HOSTS adds to one provider", () => {
    const hosts = imageHostsByProvider(loadConfig(base(), quiet));
    const bfl = hosts.get('bfl')!;
    const fal = hosts.get('fal')!;
    expect(['bfldeliveryprod.blob.core.windows.net', 'delivery-eu1.bfl.ai', 'delivery.us1.bfl.ai'].map((host) => bfl.allows(host))).toEqual([true, true, true]);
    expect(bfl.allows('bfldeliveryprodeu4.blob.core.windows.net')).toBe(false);
    expect(bfl.allows('delivery-eu1.bfl.ai', 'http:')).toBe(false);
    expect(['fal.media', 'v3.fal.media', 'v3b.fal.media'].map((host) => fal.allows(host))).toEqual([true, true, true]);
    expect(fal.allows('v3.fal.media', 'http:')).toBe(false);
    // Another provider's CDN is not fal's, nor fal's anyone else's.
    expect(['delivery-eu1.bfl.ai', 'p3-aiop-sign.byteimg.com', 'storage.googleapis.com'].map((host) => fal.allows(host))).toEqual([false, false, false]);
    expect(hosts.get('jimeng')!.allows('v3.fal.media')).toBe(false);
    const extended = imageHostsByProvider(loadConfig({ ...base(), PROVIDER_BFL_IMAGE_HOSTS: 'bfldeliveryprodeu4.blob.core.windows.net' }, quiet));
    expect(extended.get('bfl')!.allows('bfldeliveryprodeu4.blob.core.windows.net')).toBe(true);
    expect(extended.get('fal')!.allows('bfldeliveryprodeu4.blob.core.windows.net')).toBe(false);
  });
});

describe('HostAllowList and sniffing', () => {
  it('matches exact hosts with their port, and one wildcard label for subdomains on default ports', () => {
    const list = new HostAllowList(['img.example.com', '127.0.0.1:9000', '*.volces.com']);
    expect(list.allows('img.example.com')).toBe(true);
    expect(list.allows('127.0.0.1:9000')).toBe(true);
    expect(list.allows('127.0.0.1:9001')).toBe(false);
    expect(list.allows('a.b.volces.com')).toBe(true);
    expect(list.allows('volces.com')).toBe(false);
    expect(list.allows('evilvolces.com')).toBe(false);
    expect(list.allows('x.volces.com:8443')).toBe(false);
    // https only, but for an account's own host, which keeps its base URL's scheme.
    expect(list.allows('img.example.com', 'http:')).toBe(false);
    const own = list.with('10.0.0.5:9000');
    expect([own.allows('10.0.0.5:9000', 'http:'), own.allows('10.0.0.5:9000', 'https:'), own.allows('10.0.0.5:9000', 'ftp:')]).toEqual([true, true, false]);
  });

  it('recognises PNG, JPEG and WebP by their bytes, and nothing else', () => {
    expect(sniffImageType(Buffer.from('89504e470d0a1a0a0000', 'hex'))).toBe('image/png');
    expect(sniffImageType(Buffer.from('ffd8ffe000104a464946', 'hex'))).toBe('image/jpeg');
    expect(sniffImageType(Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WEBPVP8 ')]))).toBe('image/webp');
    expect(sniffImageType(Buffer.from('<!doctype html><html>'))).toBeUndefined();
    expect(sniffImageType(Buffer.from('GIF89a......'))).toBeUndefined();
    expect(sniffImageType(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBeUndefined();
    expect(sniffImageType(Buffer.from('RIFF\0\0\0\0WAVE'))).toBeUndefined();
    expect(sniffImageType(Buffer.from('8950', 'hex'))).toBeUndefined();
  });
});
