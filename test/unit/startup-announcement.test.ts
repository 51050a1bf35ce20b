import { describeListening, listeningUrls } from '../../src/startup-announcement';

describe('the startup announcement', () => {
  it('names the URLs as a person on the machine reaches them', () => {
    expect(listeningUrls('0.0.0.0', 8080, 8081)).toEqual({
      api: 'http://localhost:8080',
      docs: 'http://localhost:8080/docs',
      console: 'http://localhost:8080/console',
      internal: 'http://localhost:8081',
    });
    expect(listeningUrls('::', 9000, 9001).api).toBe('http://localhost:9000');
    expect(listeningUrls('127.0.0.1', 9000, 9001).internal).toBe('http://127.0.0.1:9001');
    expect(listeningUrls('::1', 9000, 9001).docs).toBe('http://[::1]:9000/docs');
  });

  it('says in two lines where it listens and which models a channel serves', () => {
    const lines = describeListening(listeningUrls('0.0.0.0', 3000, 3001), [
      { model: 'local-1', status: 'available' },
      { model: 'jimeng-4.5', status: 'unconfigured' },
      { model: 'jimeng-4.0', status: 'degraded' },
    ]);
    expect(lines).toEqual([
      'creative-gateway listening on http://localhost:3000: API reference http://localhost:3000/docs, console http://localhost:3000/console, internal API http://localhost:3001',
      'models: local-1, jimeng-4.5 (no channel), jimeng-4.0 (degraded)',
    ]);
  });
});
