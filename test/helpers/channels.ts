import type { ApiClient } from './test-gateway';
import { freePort } from './throwaway-servers';

/** A port nothing listens on (taken from the OS, then closed): connections to it are refused. */
export const closedPort = freePort;

/** A created channel as the admin API returns it. */
export type CreatedChannel = { id: string } & Record<string, unknown>;

/**
 * Creates a channel through the admin API (anything but 201 fails the test) and, given `created`,
 * records its id there so the test can delete it afterwards.
 */
export async function addChannel(api: ApiClient, body: Record<string, unknown>, created?: string[]): Promise<CreatedChannel> {
  const res = await api.admin('post', '/admin/channels', body);
  if (res.status !== 201) throw new Error(`createChannel: ${res.status} ${res.text}`);
  created?.push(res.body.id);
  return res.body as CreatedChannel;
}
