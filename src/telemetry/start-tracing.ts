import type { CidrSet } from '../shared/cidr';
import type { TelemetryConfig } from './telemetry-config';
import { installTracing } from './tracing';

/**
 * Starts exporting traces when an OTLP endpoint is configured: only then is the SDK imported
 * (otel-sdk.ts, a dynamic import), so a gateway without one loads none of it. The closer flushes
 * the spans still buffered.
 */
export async function startTracing(config: TelemetryConfig, trustedProxies: CidrSet | undefined): Promise<{ close(): Promise<void> } | undefined> {
  const { tracesUrl } = config;
  if (tracesUrl === undefined) return undefined;
  const { createBackend } = await import('./otel-sdk');
  const trusted = (address: string | undefined) => trustedProxies !== undefined && address !== undefined && trustedProxies.has(address);
  return installTracing(createBackend({ ...config, tracesUrl }), trusted);
}
