import { CidrSet, clientAddress, parseForwardedHop } from '../../src/shared/cidr';

describe('X-Forwarded-For hops (key allowed_ips behind TRUSTED_PROXIES)', () => {
  const proxies = CidrSet.of(['127.0.0.1/32']);
  const loopback = CidrSet.of(['127.0.0.0/8']);

  it.each([
    ['198.51.100.7', '198.51.100.7'],
    [' 198.51.100.7 ', '198.51.100.7'],
    ['198.51.100.7:443', '198.51.100.7'],
    ['2001:db8::7', '2001:db8::7'],
    ['[2001:db8::7]', '2001:db8::7'],
    ['[2001:db8::7]:443', '2001:db8::7'],
    ['::ffff:198.51.100.7', '198.51.100.7'],
    ['[::ffff:198.51.100.7]:8080', '198.51.100.7'],
  ])('reads %j as the address %s', (hop, address) => {
    expect(parseForwardedHop(hop)).toBe(address);
  });

  it.each([
    'unknown',
    '_',
    '',
    '198.51.100.7%0a',
    '198.51.100.7\n?',
    '198.51.100.7:99999',
    '198.51.100.7:',
    '[198.51.100.7]',
    '[2001:db8::7]x',
    '2001:db8::7:443x',
    'fe80::1%eth0',
    '[fe80::1%eth0]:443',
    '999.1.1.1',
    'a.b.c.d:80',
  ])('refuses %j as an address', (hop) => {
    expect(parseForwardedHop(hop)).toBeUndefined();
  });

  // Every form the red team (issue #29 §5) got past a 127.0.0.0/8 allow-list through a trusted 127.0.0.1.
  it.each([
    ['198.51.100.7:443', '198.51.100.7'],
    ['[2001:db8::7]:443', '2001:db8::7'],
    ['[2001:db8::7]', '2001:db8::7'],
    ['unknown', 'unparsable:unknown'],
    ['198.51.100.7 , _', 'unparsable:_'],
    ['_', 'unparsable:_'],
    ['198.51.100.7%0a', 'unparsable:198.51.100.7%0a'],
    ['127.0.0.5, unknown', 'unparsable:unknown'],
  ])('X-Forwarded-For %j from the trusted proxy: the client is %s, outside the allow-list', (forwardedFor, client) => {
    const address = clientAddress('127.0.0.1', forwardedFor, proxies);
    expect(address).toBe(client);
    expect(loopback.has(address)).toBe(false);
  });

  it('skips trusted hops and empty ones; keeps the proxy without a header; ignores an untrusted peer', () => {
    expect(clientAddress('127.0.0.1', '198.51.100.7, 127.0.0.1:80', proxies)).toBe('198.51.100.7');
    expect(clientAddress('127.0.0.1', ', 198.51.100.7, ', proxies)).toBe('198.51.100.7');
    expect(clientAddress('::ffff:127.0.0.1', undefined, proxies)).toBe('127.0.0.1');
    expect(clientAddress('127.0.0.1', '', proxies)).toBe('127.0.0.1');
    expect(clientAddress('203.0.113.9', 'unknown', proxies)).toBe('203.0.113.9');
    expect(clientAddress('127.0.0.1', 'unknown', undefined)).toBe('127.0.0.1');
  });

  it('bounds and cleans an unparsable hop shown in messages', () => {
    expect(clientAddress('127.0.0.1', `x y${'z'.repeat(200)}`, proxies)).toMatch(/^unparsable:x\?yz{61}$/);
  });
});
