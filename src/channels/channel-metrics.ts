import { Gauge, type Registry } from 'prom-client';
import type { ChannelRouter } from './channel-router';

/** The saturation queue's depth per model on this replica, read when Prometheus scrapes. */
export function registerChannelMetrics(registry: Registry, router: ChannelRouter): void {
  new Gauge({
    name: 'creative_gateway_channel_queue_waiting',
    help: 'Calls waiting for a channel slot on this replica (at most CHANNEL_QUEUE_MAX_WAITERS per model), by model.',
    labelNames: ['model'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [model, count] of router.waitingByModel()) this.set({ model }, count);
    },
  });
}
