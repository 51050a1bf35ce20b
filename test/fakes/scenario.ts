/** Fake upstreams take their behaviour from tokens in the prompt, e.g. "a cat [code:50411]". */
export function token(prompt: string, name: string): string | undefined {
  return new RegExp(`\\[${name}(?::([^\\]]*))?\\]`).exec(prompt)?.[1] ?? (prompt.includes(`[${name}]`) ? '' : undefined);
}

export const TINY_PNG_B64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgYGAAAAAEAAH2FzhVAAAAAElFTkSuQmCC';

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
