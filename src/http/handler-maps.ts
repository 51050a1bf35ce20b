import type { operations as CreativeOperations } from '../../generated/creative';
import type { creativeOperations } from '../../generated/creative.operations';
import type { operations as GatewayOperations } from '../../generated/gateway';
import type { gatewayOperations } from '../../generated/gateway.operations';
import type { HandlerMap } from './operation-types';

/** One handler per operation of openapi/gateway.yaml, typed from generated/. */
export type GatewayHandlers = HandlerMap<GatewayOperations, typeof gatewayOperations>;

/** One handler per operation of openapi/creative.yaml, typed from generated/. */
export type CreativeHandlers = HandlerMap<CreativeOperations, typeof creativeOperations>;
