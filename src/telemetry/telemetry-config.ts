import type { EnvValues } from '../config/env-schema';

export type SamplerName = EnvValues['OTEL_TRACES_SAMPLER'];

/** The OTEL_* variables the gateway reads, as GatewayConfig keeps them; `tracesUrl` undefined: tracing off. */
export interface TelemetryConfig {
  /** Where spans are posted (OTLP/HTTP JSON): the traces endpoint, or `<endpoint>/v1/traces`. */
  tracesUrl: string | undefined;
  /** OTEL_EXPORTER_OTLP_HEADERS as given (secret: masked in the configuration log line). */
  headers: string | undefined;
  serviceName: string;
  resourceAttributes: string | undefined;
  sampler: SamplerName;
  samplerRatio: number;
}

export function readTelemetry(values: EnvValues): TelemetryConfig {
  const base = values.OTEL_EXPORTER_OTLP_ENDPOINT;
  const endpoint = values.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base === undefined ? undefined : `${base.replace(/\/+$/, '')}/v1/traces`);
  const tracesUrl = values.OTEL_SDK_DISABLED ? undefined : endpoint;
  return {
    tracesUrl,
    headers: values.OTEL_EXPORTER_OTLP_HEADERS,
    serviceName: values.OTEL_SERVICE_NAME,
    resourceAttributes: values.OTEL_RESOURCE_ATTRIBUTES,
    sampler: values.OTEL_TRACES_SAMPLER,
    samplerRatio: values.OTEL_TRACES_SAMPLER_ARG,
  };
}

/** `name=value` pairs separated by commas, values URL-encoded (the OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES format). */
export function parseKeyValues(text: string | undefined): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const item of (text ?? '').split(',')) {
    const at = item.indexOf('=');
    if (at <= 0) continue;
    const name = item.slice(0, at).trim();
    const value = item.slice(at + 1).trim();
    try {
      pairs[name] = decodeURIComponent(value);
    } catch {
      pairs[name] = value;
    }
  }
  return pairs;
}
