import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type Context,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { type TelemetryConfig, parseKeyValues } from './telemetry-config';
import { type ActiveSpan, type SpanAttributes, type SpanKindName, type SpanOptions, type TracingBackend, errorKindOf } from './tracing';

/**
 * The OpenTelemetry SDK behind tracing.ts: loaded by start-tracing.ts only when an OTLP endpoint is
 * configured. Nothing global is registered (no global tracer provider, context manager or
 * propagator): the gateway's spans go through this module alone, so two gateways in one process
 * (tests) do not share one.
 */

const KINDS: Record<SpanKindName, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

function samplerOf(config: TelemetryConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

class OpenSpan implements ActiveSpan {
  constructor(readonly span: Span) {}

  set(attributes: SpanAttributes): void {
    this.span.setAttributes(attributes as Record<string, string | number | boolean>);
  }

  fail(kind: string): void {
    this.span.setAttribute('error.type', kind);
    this.span.setStatus({ code: SpanStatusCode.ERROR });
  }

  rename(name: string): void {
    this.span.updateName(name);
  }

  end(): void {
    this.span.end();
  }
}

export function createBackend(config: TelemetryConfig & { tracesUrl: string }): TracingBackend {
  const contextManager = new AsyncLocalStorageContextManager().enable();
  const propagator = new W3CTraceContextPropagator();
  const exporter = new OTLPTraceExporter({ url: config.tracesUrl, headers: parseKeyValues(config.headers) });
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ ...parseKeyValues(config.resourceAttributes), [ATTR_SERVICE_NAME]: config.serviceName }),
    sampler: samplerOf(config),
    spanProcessors: [new BatchSpanProcessor({ exporter })],
  });
  const tracer = provider.getTracer('creative-gateway');

  const linksOf = (traceparent: string | undefined): Link[] => {
    if (traceparent === undefined) return [];
    const linked = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter));
    return linked ? [{ context: linked }] : [];
  };

  const start = (name: string, attributes: SpanAttributes, options: SpanOptions, parent: Context): Span =>
    tracer.startSpan(
      name,
      {
        kind: KINDS[options.kind ?? 'internal'],
        attributes: attributes as Record<string, string | number>,
        links: linksOf(options.linkTo),
        ...(options.root ? { root: true } : {}),
      },
      parent,
    );

  return {
    async withSpan(name, attributes, options, run) {
      const span = start(name, attributes, options, contextManager.active());
      const open = new OpenSpan(span);
      try {
        return await contextManager.with(trace.setSpan(contextManager.active(), span), () => run(open));
      } catch (error) {
        open.fail(errorKindOf(error));
        throw error;
      } finally {
        span.end();
      }
    },

    recordSpan(name, attributes, startMs, endMs, errorKind) {
      const span = tracer.startSpan(
        name,
        { kind: SpanKind.CLIENT, attributes: attributes as Record<string, string | number>, startTime: startMs },
        contextManager.active(),
      );
      if (errorKind !== undefined) new OpenSpan(span).fail(errorKind);
      span.end(Math.max(startMs, endMs));
    },

    inject(headers) {
      propagator.inject(contextManager.active(), headers, defaultTextMapSetter);
    },

    traceparent() {
      const carrier: Record<string, string> = {};
      propagator.inject(contextManager.active(), carrier, defaultTextMapSetter);
      return carrier.traceparent;
    },

    serverSpan(req: IncomingMessage, res: ServerResponse, attributes, trustedParent, next) {
      // A client's traceparent is believed only from a trusted proxy: anyone else could pick trace ids
      // and force sampling (docs/operators/production.md, "Traces").
      const parent = trustedParent ? propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter) : ROOT_CONTEXT;
      const span = start(`${req.method ?? 'HTTP'}`, attributes, { kind: 'server' }, parent);
      const active = trace.setSpan(parent, span);
      // Body streams and the response emit outside the request's async context: bound, their
      // listeners (body parsing, then the handlers) run inside the span.
      contextManager.bind(active, req);
      contextManager.bind(active, res);
      contextManager.with(active, next);
      return new OpenSpan(span);
    },

    async shutdown() {
      await provider.shutdown();
      contextManager.disable();
    },
  };
}
