/** Per provider (PROVIDER_<NAME>_*): the request's overall deadline, busy retries and breaker; per-process cap of its environment channel. */
export interface ResilienceSettings {
  /** Overall deadline of one generation at this provider, failovers and retries included. */
  timeoutMs: number;
  /** Tries in all on one channel that keeps answering busy. */
  maxAttempts: number;
  retryBaseDelayMs: number;
  /** In-flight cap of the environment-configured channel, per process. */
  maxConcurrent: number;
  breakerThreshold: number;
  breakerCooldownMs: number;
}
