import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, describeConfig, loadConfig } from '../../src/config/config';
import { parseKeyValues } from '../../src/telemetry/telemetry-config';

/** The OTEL_* variables as the gateway reads them (docs/operators/production.md, "Traces"). */
describe('traces configuration', () => {
  const load = (env: Record<string, string>) =>
    loadConfig({ DATABASE_URL: path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-otel-')), 'gw.db'), ...env }, () => undefined).telemetry;

  it('is off without an endpoint', () => {
    expect(load({})).toMatchObject({ tracesUrl: undefined, serviceName: 'creative-gateway', sampler: 'parentbased_always_on', samplerRatio: 1 });
  });

  it('posts to <endpoint>/v1/traces, or to the traces endpoint, which wins; OTEL_SDK_DISABLED turns it off', () => {
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracesUrl).toBe('http://collector:4318/v1/traces');
    expect(
      load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://vendor.example/otlp/traces' }).tracesUrl,
    ).toBe('https://vendor.example/otlp/traces');
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracesUrl).toBeUndefined();
  });

  it('refuses a protocol other than http/json and an unknown sampler, naming the variable', () => {
    expect(() => load({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(ConfigError);
    expect(() => load({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL/);
    expect(() => load({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER/);
  });

  it("masks the export headers (a vendor's API key) in the configuration log line", () => {
    const config = loadConfig(
      { DATABASE_URL: path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'cgw-otel-')), 'gw.db'), OTEL_EXPORTER_OTLP_HEADERS: 'api-key=vendor-secret-1' },
      () => undefined,
    );
    expect(JSON.stringify(describeConfig(config))).not.toContain('vendor-secret-1');
  });

  it('reads name=value pairs as the OTEL_* format writes them (URL-encoded values)', () => {
    expect(parseKeyValues('api-key=a%2Cb, x-team = blue ,broken')).toEqual({ 'api-key': 'a,b', 'x-team': 'blue' });
    expect(parseKeyValues(undefined)).toEqual({});
  });
});
