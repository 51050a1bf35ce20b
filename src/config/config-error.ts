/** A configuration the gateway refuses to start with; startup prints its message as one line (exit 78). */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
