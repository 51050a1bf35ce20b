import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signs image URLs so they work in an `<img>` tag without the API key: HMAC-SHA256 over
 * `<image id>.<expires>` (unix seconds), base64url. Every replica needs the same key
 * (IMAGE_URL_SIGNING_KEY); changing it invalidates every URL handed out.
 */
export class ImageUrlSigner {
  constructor(private readonly key: string) {}

  sign(imageId: string, expiresSeconds: number): string {
    return createHmac('sha256', this.key).update(`${imageId}.${expiresSeconds}`).digest('base64url');
  }

  verify(imageId: string, expiresSeconds: number, signature: string): boolean {
    const expected = Buffer.from(this.sign(imageId, expiresSeconds));
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
