import { tracingEnabled, withSpan } from '../../src/telemetry/tracing';
import { startTracing } from '../../src/telemetry/start-tracing';
import type { TelemetryConfig } from '../../src/telemetry/telemetry-config';

/** The OpenTelemetry SDK's modules as they sit in node_modules (the API package alone would be allowed). */
const SDK = /node_modules\/@opentelemetry\/(sdk-trace|exporter-trace-otlp-http|otlp-exporter-base|otlp-transformer|resources|core|context-async-hooks)\//;
const sdkModules = () => Object.keys(require.cache).filter((path) => SDK.test(path));

const off: TelemetryConfig = {
  tracesUrl: undefined,
  headers: undefined,
  serviceName: 'creative-gateway',
  resourceAttributes: undefined,
  sampler: 'parentbased_always_on',
  samplerRatio: 1,
};

describe('tracing without an OTLP endpoint', () => {
  it('loads no module of the SDK: not with the gateway, not when asked to start', async () => {
    // Everything that calls the tracing facade, and the gateway's wiring itself.
    require('../../src/server');
    require('../../src/http/request-context');
    require('../../src/providers/upstream-http');
    require('../../src/webhooks/dispatcher');
    require('../../src/guardrails/moderation-hook');
    expect(await startTracing(off, undefined)).toBeUndefined();
    expect(tracingEnabled()).toBe(false);
    // The facade runs the work itself, with nothing around it.
    await expect(withSpan('work', {}, async () => 42)).resolves.toBe(42);
    expect(sdkModules()).toEqual([]);
  });

  it('is what the check above would see: with an endpoint, the SDK is loaded', async () => {
    const tracing = await startTracing({ ...off, tracesUrl: 'http://127.0.0.1:9/v1/traces' }, undefined);
    try {
      expect(tracingEnabled()).toBe(true);
      expect(sdkModules().length).toBeGreaterThan(0);
    } finally {
      await tracing?.close();
    }
    expect(tracingEnabled()).toBe(false);
  });
});
