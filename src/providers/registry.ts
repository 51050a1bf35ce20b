import type { WireClient } from './provider';
import type { WireFormat } from './wire-client';

/** A client of one of the environment's accounts: `provider` over `format`. */
export interface EnvironmentAccountClient {
  provider: string;
  format: WireFormat;
  client: WireClient;
}

/**
 * The providers this gateway knows by name (what keys list in `allowed_providers`, whether or not
 * the environment configures an account for them), and the clients of the environment's accounts.
 */
export class ProviderRegistry {
  private readonly known: ReadonlySet<string>;

  constructor(
    names: Iterable<string>,
    private readonly accounts: readonly EnvironmentAccountClient[] = [],
  ) {
    this.known = new Set(names);
  }

  has(name: string): boolean {
    return this.known.has(name);
  }

  names(): ReadonlySet<string> {
    return this.known;
  }

  /** The client of the environment's account for `provider` over `format`; undefined when the environment configures none. */
  environmentClient(provider: string, format: string): WireClient | undefined {
    return this.accounts.find((account) => account.provider === provider && account.format === format)?.client;
  }
}
