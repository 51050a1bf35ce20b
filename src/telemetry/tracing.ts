import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The one door to tracing (docs/operators/production.md, "Traces"). The rest of the gateway calls
 * these functions; with no OTLP endpoint configured none of them loads anything or allocates: each
 * is a check of one variable, then the plain call. The SDK (otel-sdk.ts) is imported only by
 * startTracing, when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces one) is set.
 */

/**
 * The attributes a span may carry: named here, so that no call site can attach a prompt, an image,
 * a credential or a header value by accident (only ids, names, numbers and outcomes are listed).
 */
export interface SpanAttributes {
  'http.request.method'?: string;
  'http.route'?: string;
  'http.response.status_code'?: number;
  'url.scheme'?: string;
  'server.address'?: string;
  'server.port'?: number;
  'gateway.operation_id'?: string;
  'gateway.request_id'?: string;
  'gateway.generation.id'?: string;
  'gateway.key.id'?: string;
  'gateway.project.id'?: string;
  'gateway.channel.id'?: string;
  'gateway.image_index'?: number;
  'gateway.outcome'?: string;
  'gateway.step'?: string;
  'gateway.images'?: number;
  'gateway.credits'?: number;
  'gateway.webhook.endpoint_id'?: string;
  'gateway.webhook.event_type'?: string;
  'gateway.moderation.decision'?: string;
  'error.type'?: string;
  'gen_ai.operation.name'?: string;
  'gen_ai.provider.name'?: string;
  'gen_ai.system'?: string;
  'gen_ai.request.model'?: string;
  'gen_ai.response.model'?: string;
  'gen_ai.usage.input_tokens'?: number;
  'gen_ai.usage.output_tokens'?: number;
}

export type SpanKindName = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** A started span, as the code around it sees it: attributes added, an error kind, an end. */
export interface ActiveSpan {
  set(attributes: SpanAttributes): void;
  /** Marks the span failed with `kind` (an error code or a failure class; never a message). */
  fail(kind: string): void;
  rename(name: string): void;
  end(): void;
}

export interface SpanOptions {
  kind?: SpanKindName;
  /** A W3C traceparent this span is linked to (a background run to the request that queued it). */
  linkTo?: string;
  /** Starts a new trace rather than a child of the active span. */
  root?: boolean;
}

/** What otel-sdk.ts provides once loaded. */
export interface TracingBackend {
  withSpan<T>(name: string, attributes: SpanAttributes, options: SpanOptions, run: (span: ActiveSpan) => Promise<T>): Promise<T>;
  recordSpan(name: string, attributes: SpanAttributes, startMs: number, endMs: number, errorKind: string | undefined): void;
  inject(headers: Record<string, string>): void;
  traceparent(): string | undefined;
  serverSpan(req: IncomingMessage, res: ServerResponse, attributes: SpanAttributes, trustedParent: boolean, next: () => void): ActiveSpan;
  shutdown(): Promise<void>;
}

export const NO_SPAN: ActiveSpan = { set: () => undefined, fail: () => undefined, rename: () => undefined, end: () => undefined };

let backend: TracingBackend | undefined;
/** Peers whose `traceparent` is believed (TRUSTED_PROXIES). */
let trustedPeer: (address: string | undefined) => boolean = () => false;

/** Whether traces are exported (an OTLP endpoint is configured and the SDK started). */
export function tracingEnabled(): boolean {
  return backend !== undefined;
}

/** Runs `run` inside a child span of the active one (ended when it settles, failed with the error's code when it throws). */
export function withSpan<T>(name: string, attributes: SpanAttributes, run: (span: ActiveSpan) => Promise<T>, options: SpanOptions = {}): Promise<T> {
  return backend === undefined ? run(NO_SPAN) : backend.withSpan(name, attributes, options, run);
}

/** A finished piece of work as a child span of the active one, from its recorded start and end (epoch ms). */
export function recordSpan(name: string, attributes: SpanAttributes, startMs: number, endMs: number, errorKind?: string): void {
  backend?.recordSpan(name, attributes, startMs, endMs, errorKind);
}

/** Adds the active span's `traceparent` (and `tracestate`) to an outgoing call's headers. */
export function injectTraceContext(headers: Record<string, string>): void {
  backend?.inject(headers);
}

/** The active span's traceparent, kept with work that runs later (a queued generation). */
export function currentTraceparent(): string | undefined {
  return backend?.traceparent();
}

/**
 * The server span of one request, active for everything the request runs; `next` is called inside
 * it. Without tracing: undefined, and `next` is not called (the caller calls it).
 */
export function startServerSpan(req: IncomingMessage, res: ServerResponse, attributes: SpanAttributes, next: () => void): ActiveSpan | undefined {
  return backend?.serverSpan(req, res, attributes, trustedPeer(req.socket.remoteAddress), next);
}

/** Installs the SDK's backend (otel-sdk.ts); the closer flushes and removes it. */
export function installTracing(installed: TracingBackend, trusted: (address: string | undefined) => boolean): { close(): Promise<void> } {
  backend = installed;
  trustedPeer = trusted;
  return {
    async close() {
      if (backend === installed) backend = undefined;
      await installed.shutdown();
    },
  };
}

/** The error kind a span records for a thrown value: its code when it has one (ApiError, system errors), else its class. */
export function errorKindOf(error: unknown): string {
  if (error && typeof error === 'object') {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    if (error instanceof Error) return error.name;
  }
  return 'error';
}
