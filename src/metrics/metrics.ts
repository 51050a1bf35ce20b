import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics of one gateway process (its own registry, so several gateways in one test
 * process do not collide). Served at GET /metrics on the internal listener.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'creative_gateway_http_requests_total',
    help: 'HTTP requests by listener, method, route template and status.',
    labelNames: ['listener', 'method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly generationSeconds = new Histogram({
    name: 'creative_gateway_generation_seconds',
    help: 'Provider time per generation, by provider and outcome.',
    labelNames: ['provider', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 40, 60, 120],
    registers: [this.registry],
  });
  readonly creditsCharged = new Counter({
    name: 'creative_gateway_credits_charged_total',
    help: 'Credits charged to keys for successful generations, by model.',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly unbilledImages = new Counter({
    name: 'creative_gateway_unbilled_images_total',
    help: "Images made (or possibly made) upstream that no key paid for: the operator's loss, by reason (src/generation/charges.ts).",
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly unbilledCredits = new Counter({
    name: 'creative_gateway_unbilled_credits_total',
    help: "Credits the delivered quantities cost beyond what the generation reserved (a larger image than asked, tokens past the bound): the operator's loss, by model and reason (src/generation/charges.ts deliveredCharge).",
    labelNames: ['model', 'reason'] as const,
    registers: [this.registry],
  });
  readonly overloadRefusals = new Counter({
    name: 'creative_gateway_overload_refusals_total',
    help: 'Generation requests refused with 503 overloaded (SHED_EVENT_LOOP_DELAY_MS, SHED_DATABASE_WAIT_MS, ADMISSION_DATABASE_WAIT_MS).',
    registers: [this.registry],
  });
  readonly rateLimitRefusals = new Counter({
    name: 'creative_gateway_rate_limit_refusals_total',
    help: 'Requests refused with 429 rate_limited.',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'creative_gateway_' });
  }
}
