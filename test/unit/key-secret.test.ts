import { generateKeySecret, hashKey, isWellFormedKey, keyHint } from '../../src/keys/key-secret';

describe('key secrets', () => {
  it('look like hyai_ + 36 base62 chars and carry a valid checksum', () => {
    const keys = new Set(Array.from({ length: 200 }, generateKeySecret));
    expect(keys.size).toBe(200);
    for (const key of keys) {
      expect(key).toMatch(/^hyai_[0-9A-Za-z]{36}$/);
      expect(isWellFormedKey(key)).toBe(true);
    }
  });

  it('refuses any single-character change and wrong shapes', () => {
    const key = generateKeySecret();
    for (let i = 5; i < key.length; i += 1) {
      const swapped = key.slice(0, i) + (key[i] === 'a' ? 'b' : 'a') + key.slice(i + 1);
      expect(isWellFormedKey(swapped)).toBe(false);
    }
    for (const bad of ['', 'hyai_', `${key}x`, key.replace('hyai_', 'hyak_'), key.slice(0, -1)]) expect(isWellFormedKey(bad)).toBe(false);
  });

  it('hashes with SHA-256 and hints with the first and last four', () => {
    expect(hashKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(keyHint('hyai_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')).toBe('hyai_ABCD...6789');
  });
});
