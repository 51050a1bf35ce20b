import { parsePrefer } from '../../src/http/prefer';

describe('Prefer header (RFC 7240) on the generation operations', () => {
  it('reads respond-async and wait=N, alone or together, in any case and order', () => {
    expect(parsePrefer('respond-async')).toEqual({ respondAsync: true, waitSeconds: 0 });
    expect(parsePrefer('wait=5')).toEqual({ respondAsync: false, waitSeconds: 5 });
    expect(parsePrefer('wait=10, Respond-Async')).toEqual({ respondAsync: true, waitSeconds: 10 });
    expect(parsePrefer('respond-async; foo=bar, wait="7"')).toEqual({ respondAsync: true, waitSeconds: 7 });
  });

  it('caps wait at 60 s and ignores what it does not honour', () => {
    expect(parsePrefer('wait=3600')).toEqual({ respondAsync: false, waitSeconds: 60 });
    expect(parsePrefer(undefined)).toBeUndefined();
    expect(parsePrefer('return=minimal')).toBeUndefined();
    expect(parsePrefer('wait=soon')).toBeUndefined();
    expect(parsePrefer('wait=-1, handling=strict')).toBeUndefined();
  });
});
