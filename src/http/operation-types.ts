import type { RequestHandler } from 'express';
import type { PrincipalBySecurityScheme, AnonymousPrincipal } from '../auth/principal';

/**
 * Types of the spec-driven router: what a handler of operation `Op` receives and may return, all
 * derived from `generated/` (openapi-typescript's `operations` and the `*.operations.ts` metadata).
 * A handler that returns a status or body the spec does not document for it fails `tsc`.
 */

/** The shape openapi-typescript gives an operation. */
export interface GeneratedOperation {
  parameters: object;
  requestBody?: unknown;
  responses: object;
}

/** The metadata `npm run gen` emits for one operation. */
export interface OperationMeta {
  readonly method: string;
  readonly path: string;
  readonly security: readonly (readonly string[])[];
  readonly extensions: Readonly<Record<string, unknown>>;
}

type Part<P, K extends string> = K extends keyof P ? ([NonNullable<P[K]>] extends [never] ? Record<string, never> : NonNullable<P[K]>) : Record<string, never>;

type BodyOf<Op> = Op extends { requestBody: { content: infer C } }
  ? C[keyof C]
  : Op extends { requestBody?: { content: infer C } }
    ? C[keyof C] | undefined
    : undefined;

type ContentOf<R> = R extends { content: infer C } ? C[keyof C] : undefined;

type SuccessStatus<Responses> = Extract<keyof Responses, 200 | 201 | 202 | 204>;

/** The principal an operation's `security` yields: the union over its alternatives. */
export type PrincipalOf<Meta extends OperationMeta> = Meta['security'] extends readonly []
  ? AnonymousPrincipal
  : PrincipalBySecurityScheme[Extract<Meta['security'][number][number], keyof PrincipalBySecurityScheme>];

export interface OperationRequest<Op extends GeneratedOperation, Principal> {
  /** Path parameters, as the spec types them. */
  params: Part<Op['parameters'], 'path'>;
  /** Query parameters, converted to the spec's types (integers are numbers). */
  query: Part<Op['parameters'], 'query'>;
  body: BodyOf<Op>;
  principal: Principal;
  requestId: string;
  /** The socket's remote address (what audit events record as the client IP). */
  clientIp: string;
  /** Aborts when the client goes away before the response is sent. */
  readonly signal: AbortSignal;
  /** Header values by lower-case name. */
  header(name: string): string | undefined;
}

/** One documented success response. */
export type OperationResponse<Op extends GeneratedOperation> = {
  [S in SuccessStatus<Op['responses']>]: {
    status: S;
    body: ContentOf<Op['responses'][S]>;
    headers?: Record<string, string>;
    /** For a non-JSON body (text/html, text/plain). */
    contentType?: string;
  };
}[SuccessStatus<Op['responses']>];

export type OperationHandler<Op extends GeneratedOperation, Meta extends OperationMeta> = (
  request: OperationRequest<Op, PrincipalOf<Meta>>,
) => Promise<OperationResponse<Op>> | OperationResponse<Op>;

/** For the few operations that stream a page of their own (the Scalar reference). */
export interface RawOperationHandler {
  raw: RequestHandler;
}

/** One handler per operationId: missing or extra keys fail `tsc` (and startup). */
export type HandlerMap<Ops, Metas extends Record<string, OperationMeta>> = {
  [Id in keyof Metas & keyof Ops]: Ops[Id] extends GeneratedOperation ? OperationHandler<Ops[Id], Metas[Id]> | RawOperationHandler : never;
};
