/** An operation's path template (from generated/*.operations.ts) with its parameters filled in, e.g. for `Location`. */
export function fillPath(template: string, params: Record<string, string>): string {
  return template.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(params[name] ?? ''));
}
