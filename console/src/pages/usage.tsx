import type { Session } from '../session';

/** Placeholder until GET /admin/usage is in the spec. */
export function UsagePage(_props: { session: Session }) {
  return <p>Usage analytics need GET /admin/usage.</p>;
}

export function KeySparkline(_props: { keyId: string; name: string }) {
  return null;
}
