import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedWebhook {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  /** The body parsed by standardwebhooks' verify() under the secret given, or undefined when not verified. */
  event?: { type: string; timestamp: string; data: Record<string, unknown> };
}

/**
 * A webhook receiver for tests: records every POST, verifies it with the `standardwebhooks`
 * package when given the endpoint's secret, and answers what the test scripts (200 by default;
 * `'hold'` keeps the request open until release()).
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  private answers: Array<number | 'hold'> = [];
  private held: Array<() => void> = [];
  private server!: http.Server;
  url = '';
  secrets: string[] = [];

  /** `port`: listen there (a receiver that comes back up at the address it had). */
  async start(port = 0): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        const headers = {
          'webhook-id': String(req.headers['webhook-id']),
          'webhook-timestamp': String(req.headers['webhook-timestamp']),
          'webhook-signature': String(req.headers['webhook-signature']),
        };
        const entry: ReceivedWebhook = { id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], signature: headers['webhook-signature'], body };
        for (const secret of this.secrets) {
          try {
            entry.event = new Webhook(secret).verify(body, headers) as ReceivedWebhook['event'];
            break;
          } catch {
            // Try the next secret.
          }
        }
        this.received.push(entry);
        const answer = this.answers.shift() ?? 200;
        if (answer === 'hold') {
          this.held.push(() => res.writeHead(200).end());
          return;
        }
        res.writeHead(answer, answer >= 300 && answer < 400 ? { Location: `${this.url}/redirected` } : {}).end();
      });
    });
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The next answers, in order (then 200). */
  answer(...statuses: Array<number | 'hold'>): void {
    this.answers.push(...statuses);
  }

  /** Forgets scripted answers not used yet. */
  clearAnswers(): void {
    this.answers = [];
  }

  release(): void {
    for (const release of this.held) release();
    this.held = [];
  }

  verified(type?: string): ReceivedWebhook[] {
    return this.received.filter((r) => r.event !== undefined && (type === undefined || r.event.type === type));
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
