import { isBlockedAddress, urlProblem } from '../../src/shared/safe-url';

/** The address guard of webhooks, image-input URLs and API channels' upstreams (src/shared/safe-url.ts). */
describe('isBlockedAddress', () => {
  const privateAddresses = [
    '127.0.0.1',
    '10.1.2.3',
    '::1',
    '::',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    // IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0:0/96) spellings.
    '::127.0.0.1',
    '::7f00:1',
    '::ffff:0:127.0.0.1',
    '::ffff:0:7f00:1',
    '::ffff:0:a00:1',
    'fc00::1',
    // Documentation ranges (RFC 5737, RFC 3849): reserved, no real host.
    '192.0.2.10',
    '198.51.100.7',
    '203.0.113.10',
    '::ffff:203.0.113.10',
    '2001:db8::1',
  ];
  const metadataAddresses = [
    '169.254.169.254',
    '::ffff:169.254.169.254',
    '::a9fe:a9fe',
    '::ffff:0:a9fe:a9fe',
    'fd00:ec2::254',
    'fe80::1',
    '100.100.100.200',
    // Alibaba Cloud's metadata address in each IPv6 spelling: IPv4-mapped (dotted and hex), -compatible, -translated, NAT64.
    '::ffff:100.100.100.200',
    '::ffff:6464:64c8',
    '::6464:64c8',
    '::100.100.100.200',
    '::ffff:0:6464:64c8',
    '64:ff9b::6464:64c8',
    '64:ff9b::100.100.100.200',
    '64:ff9b::a9fe:a9fe',
    // NAT64, whatever it carries: a translator sends it anywhere in IPv4.
    '64:ff9b::7f00:1',
    '64:ff9b::808:808',
    '64:ff9b:1::a00:1',
    '64:ff9b:1:ffff::1',
  ];
  const publicAddresses = ['8.8.8.8', '93.184.216.34', '::ffff:8.8.8.8', '::ffff:808:808', '2606:4700::1111', '2a00:1450:4001::200e'];

  it.each([...privateAddresses, ...metadataAddresses])('refuses %s by default', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  it.each(metadataAddresses)('refuses %s where private networks are allowed', (address) => {
    expect(isBlockedAddress(address, true)).toBe(true);
  });

  it.each(privateAddresses)('lets %s through where private networks are allowed', (address) => {
    expect(isBlockedAddress(address, true)).toBe(false);
  });

  it.each(publicAddresses)('lets public %s through', (address) => {
    expect(isBlockedAddress(address)).toBe(false);
  });

  it('urlProblem reads bracketed IPv6 literals as the URL parser normalises them', () => {
    expect(urlProblem('https://[::127.0.0.1]/x', false)).toContain('loopback');
    expect(urlProblem('https://[::ffff:0:169.254.169.254]/x', true)).toContain('metadata');
    expect(urlProblem('https://[::1]/x', true)).toBeUndefined();
    expect(urlProblem('https://[2606:4700::1111]/x', false)).toBeUndefined();
    expect(urlProblem('https://[2001:db8::1]/x', false)).toContain('loopback, private');
    expect(urlProblem('https://[64:ff9b::6464:64c8]/x', true)).toContain('metadata');
  });
});
