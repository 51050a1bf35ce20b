import type { ApiClient } from './test-gateway';

/** Creates an admin token with the admin secret; returns its id and secret. */
export async function createAdminTokenVia(api: ApiClient, scopes: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; token: string }> {
  const res = await api.admin('post', '/admin/tokens', { name: `token ${scopes.join(' ')}`, scopes, ...extra });
  if (res.status !== 201) throw new Error(`createAdminToken failed: ${res.status} ${res.text}`);
  return { id: res.body.id as string, token: res.body.token as string };
}

export function bearer(token: string): Record<string, string> {
  return { Authorization: `Bearer ${token}` };
}
