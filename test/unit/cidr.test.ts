import { CidrSet, embeddedIpv4, normalizeIp, parseCidr } from '../../src/shared/cidr';

/**
 * CIDR parsing and matching (key allowed_ips, TRUSTED_PROXIES). X-Forwarded-For hops and the
 * client address are covered by forwarded-for.test.ts.
 */
describe('parseCidr', () => {
  it.each([
    ['203.0.113.0/24', { address: '203.0.113.0', prefix: 24, family: 'ipv4' }],
    ['198.51.100.7', { address: '198.51.100.7', prefix: 32, family: 'ipv4' }],
    ['0.0.0.0/0', { address: '0.0.0.0', prefix: 0, family: 'ipv4' }],
    ['10.0.0.1/32', { address: '10.0.0.1', prefix: 32, family: 'ipv4' }],
    ['2001:db8::/32', { address: '2001:db8::', prefix: 32, family: 'ipv6' }],
    ['::1', { address: '::1', prefix: 128, family: 'ipv6' }],
    ['::/0', { address: '::', prefix: 0, family: 'ipv6' }],
    ['2001:db8::1/128', { address: '2001:db8::1', prefix: 128, family: 'ipv6' }],
    ['  10.0.0.0/8 \n', { address: '10.0.0.0', prefix: 8, family: 'ipv4' }],
  ])('reads %j', (text, cidr) => {
    expect(parseCidr(text)).toEqual(cidr);
  });

  it.each([
    '',
    '/',
    '/24',
    '10.0.0.0/',
    '10.0.0.0/33',
    '10.0.0.0/-1',
    '10.0.0.0/08',
    '10.0.0.0/+8',
    '10.0.0.0/8.0',
    '10.0.0.0/ 8',
    '10.0.0.0 /8',
    '10.0.0.0/8/8',
    '10.0.0.0/1000',
    '2001:db8::/129',
    '2001:db8::/0128',
    '256.0.0.0/8',
    '10.0.0/8',
    'example.com',
    'localhost',
    '[2001:db8::1]',
    '10.0.0.0-10.0.0.255',
    '*',
    'fe80::1%eth0',
    'fe80::%eth0/64',
  ])('refuses %j', (text) => {
    expect(parseCidr(text)).toBeUndefined();
  });
});

describe('normalizeIp', () => {
  it('reads an IPv4-mapped IPv6 address (a dual-stack socket) as the IPv4 address', () => {
    expect(normalizeIp('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(normalizeIp('::FFFF:198.51.100.7')).toBe('198.51.100.7');
  });

  it('leaves every other address as it is', () => {
    expect(normalizeIp('198.51.100.7')).toBe('198.51.100.7');
    expect(normalizeIp('2001:db8::7')).toBe('2001:db8::7');
    expect(normalizeIp('::1')).toBe('::1');
    expect(normalizeIp('::ffff:c633:6407')).toBe('::ffff:c633:6407');
    expect(normalizeIp('64:ff9b::198.51.100.7')).toBe('64:ff9b::198.51.100.7');
    expect(normalizeIp('')).toBe('');
  });
});

describe('CidrSet', () => {
  const set = CidrSet.of(['203.0.113.0/24', '198.51.100.7', '2001:db8::/32', '::1']);

  it('matches addresses inside a CIDR, up to both ends', () => {
    expect(set.has('203.0.113.0')).toBe(true);
    expect(set.has('203.0.113.255')).toBe(true);
    expect(set.has('203.0.112.255')).toBe(false);
    expect(set.has('203.0.114.0')).toBe(false);
  });

  it('a single address is a /32 or /128', () => {
    expect(set.has('198.51.100.7')).toBe(true);
    expect(set.has('198.51.100.6')).toBe(false);
    expect(set.has('198.51.100.8')).toBe(false);
    expect(set.has('::1')).toBe(true);
    expect(set.has('::2')).toBe(false);
  });

  it('matches IPv6 in any spelling', () => {
    expect(set.has('2001:db8::1')).toBe(true);
    expect(set.has('2001:0db8:0000:0000:0000:0000:0000:0001')).toBe(true);
    expect(set.has('2001:DB8:FFFF:FFFF:FFFF:FFFF:FFFF:FFFF')).toBe(true);
    expect(set.has('2001:db9::')).toBe(false);
  });

  it('matches an IPv4 peer on a dual-stack socket, and trims', () => {
    expect(set.has('::ffff:203.0.113.9')).toBe(true);
    expect(set.has(' 203.0.113.9 ')).toBe(true);
  });

  it('a CIDR written with host bits set covers its whole network', () => {
    const hostBits = CidrSet.of(['10.1.2.3/8']);
    expect(hostBits.has('10.200.0.1')).toBe(true);
    expect(hostBits.has('11.0.0.0')).toBe(false);
  });

  it('/0 covers its whole family, and only it', () => {
    const anyV4 = CidrSet.of(['0.0.0.0/0']);
    expect(anyV4.has('255.255.255.255')).toBe(true);
    expect(anyV4.has('2001:db8::1')).toBe(false);
    const anyV6 = CidrSet.of(['::/0']);
    expect(anyV6.has('2001:db8::1')).toBe(true);
  });

  it('what is not an address matches nothing, even a list of everything', () => {
    const everything = CidrSet.of(['0.0.0.0/0', '::/0']);
    for (const text of ['', 'unknown', 'unparsable:203.0.113.9', '203.0.113.9:443', '[::1]', '999.0.0.1', '::ffff:999.0.0.1']) {
      expect(everything.has(text)).toBe(false);
    }
  });

  it('an empty set matches nothing', () => {
    expect(CidrSet.of([]).has('127.0.0.1')).toBe(false);
  });

  it('of() throws on a malformed entry, naming it', () => {
    expect(() => CidrSet.of(['10.0.0.0/8', '10.0.0.0/40'])).toThrow('not a CIDR: 10.0.0.0/40');
  });
});

/** The IPv4 address an IPv6 spelling reaches (the address guard checks both: src/shared/safe-url.ts). */
describe('embeddedIpv4', () => {
  it.each([
    ['::ffff:100.100.100.200', '100.100.100.200'],
    ['::ffff:6464:64c8', '100.100.100.200'],
    ['::FFFF:6464:64C8', '100.100.100.200'],
    ['0:0:0:0:0:ffff:6464:64c8', '100.100.100.200'],
    ['::6464:64c8', '100.100.100.200'],
    ['::100.100.100.200', '100.100.100.200'],
    ['::ffff:0:6464:64c8', '100.100.100.200'],
    ['::ffff:0:100.100.100.200', '100.100.100.200'],
    ['64:ff9b::6464:64c8', '100.100.100.200'],
    ['64:ff9b::169.254.169.254', '169.254.169.254'],
    ['64:ff9b:0:0:0:0:a9fe:a9fe', '169.254.169.254'],
    ['::1', '0.0.0.1'],
    ['::', '0.0.0.0'],
  ])('%s carries %s', (address, ipv4) => {
    expect(embeddedIpv4(address)).toBe(ipv4);
  });

  it.each([
    '100.100.100.200',
    '2606:4700::1111',
    'fd00:ec2::254',
    '64:ff9b:1::a00:1',
    '64:ff9b:0:1::6464:64c8',
    '::1:ffff:6464:64c8',
    'fe80::1%eth0',
    'not an address',
    '',
  ])('%j carries none', (address) => {
    expect(embeddedIpv4(address)).toBeUndefined();
  });
});
