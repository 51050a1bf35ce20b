import { solidPng } from './solid-images';

/** Fake upstreams take their behaviour from tokens in the prompt, e.g. "a cat [code:50411]". */
export function token(prompt: string, name: string): string | undefined {
  return new RegExp(`\\[${name}(?::([^\\]]*))?\\]`).exec(prompt)?.[1] ?? (prompt.includes(`[${name}]`) ? '' : undefined);
}

export const TINY_PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC';

/** `WxH` (Ark also writes `W×H`) as numbers; undefined for anything else. */
export function sizeOf(text: unknown): { width: number; height: number } | undefined {
  const match = /^(\d+)[x×](\d+)$/.exec(String(text));
  return match ? { width: Number(match[1]), height: Number(match[2]) } : undefined;
}

export function readBody(req: import('node:http').IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res: import('node:http').ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

export const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Image files the fakes serve from their own host, as real upstreams hand out URLs to their
 * storage. The prompt token [image:KIND] picks a misbehaving file: `html` (an HTML page with status
 * 200), `huge` (a PNG header then 4 MiB, streamed without Content-Length), `redirect` (302 to
 * another host), `missing` (404), `foreign` (a good PNG, on a URL naming another host). Without
 * it, a PNG of `size` (the size the upstream made; 1x1 when the caller gives none).
 */
export function imageFileUrl(
  req: import('node:http').IncomingMessage,
  prompt: string,
  name: string,
  size: { width: number; height: number } = { width: 1, height: 1 },
): string {
  const kind = token(prompt, 'image') ?? 'png';
  // `foreign`: a good PNG, but named by another host (localhost instead of 127.0.0.1).
  const host = kind === 'foreign' ? String(req.headers.host).replace('127.0.0.1', 'localhost') : req.headers.host;
  return `http://${host}/files/${kind}-${name}-${size.width}x${size.height}.png`;
}

/** Answers GET /files/... (see imageFileUrl); false when the request is something else. */
export function serveImageFile(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): boolean {
  const match = /^\/files\/([a-z]+)-/.exec(req.url ?? '');
  if (req.method !== 'GET' || !match) return false;
  const kind = match[1];
  if (kind === 'html') {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<!doctype html><html><body>Access denied</body></html>');
  } else if (kind === 'huge') {
    res.writeHead(200, { 'Content-Type': 'image/png' });
    const chunk = Buffer.alloc(65_536);
    Buffer.from(TINY_PNG_B64, 'base64').copy(chunk);
    let sent = 0;
    const pump = () => {
      while (sent < 64 && !res.destroyed) {
        sent += 1;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  } else if (kind === 'redirect') {
    res.writeHead(302, { Location: 'http://elsewhere.invalid/stolen.png' });
    res.end();
  } else if (kind === 'missing') {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    res.end('no such file');
  } else {
    // The path names the size; a query (a signed URL's, as the visual fake's) is not part of it.
    const size = /-(\d+)x(\d+)\.png$/.exec((req.url ?? '').split('?')[0]!);
    const png = size ? solidPng(Number(size[1]), Number(size[2])) : Buffer.from(TINY_PNG_B64, 'base64');
    res.writeHead(200, { 'Content-Type': 'image/png', 'Content-Length': png.length });
    res.end(png);
  }
  return true;
}

/** What one fake upstream account saw: calls in flight now and at most, and calls started per minute. */
export class AccountCounters {
  inFlight = 0;
  peakInFlight = 0;
  readonly startedAt: number[] = [];

  /** Counts a call that starts now; the returned function ends it (idempotent). */
  start(): () => void {
    this.inFlight += 1;
    this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
    this.startedAt.push(Date.now());
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight -= 1;
    };
  }

  /** The most calls started within any 60 s window. */
  peakPerMinute(): number {
    let peak = 0;
    let first = 0;
    for (let last = 0; last < this.startedAt.length; last += 1) {
      while (this.startedAt[last]! - this.startedAt[first]! >= 60_000) first += 1;
      peak = Math.max(peak, last - first + 1);
    }
    return peak;
  }

  get calls(): number {
    return this.startedAt.length;
  }
}

/**
 * A fake's request handler written as an async function: a failure of the fake itself answers 500
 * (and ends the response) instead of becoming an unhandled rejection that would end the test run.
 */
export function answering(
  handle: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => Promise<unknown>,
): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void {
  return (req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(`fake failed: ${String(error)}`);
    });
  };
}
