/** The longest `Prefer: wait=N` honoured (as Replicate's `Prefer: wait`). */
const MAX_WAIT_SECONDS = 60;

/** RFC 7240 preferences this API honours; undefined when the request asked for neither (synchronous). */
export function parsePrefer(header: string | undefined): { respondAsync: boolean; waitSeconds: number } | undefined {
  if (header === undefined) return undefined;
  let respondAsync = false;
  let waitSeconds: number | undefined;
  for (const part of header.split(',')) {
    const [name, value] = part
      .split(';')[0]!
      .trim()
      .split('=')
      .map((t) => t.trim().replace(/^"|"$/g, ''));
    if (name?.toLowerCase() === 'respond-async') respondAsync = true;
    if (name?.toLowerCase() === 'wait' && value !== undefined && /^\d{1,6}$/.test(value)) waitSeconds = Math.min(Number(value), MAX_WAIT_SECONDS);
  }
  // Unknown preferences are ignored (RFC 7240 §2).
  if (!respondAsync && waitSeconds === undefined) return undefined;
  return { respondAsync, waitSeconds: waitSeconds ?? 0 };
}
