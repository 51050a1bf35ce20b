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
