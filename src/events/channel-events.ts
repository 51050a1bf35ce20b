import { type Db, emitEvent } from './outbox';

/** A channel the gateway disabled by itself (auth failures and the like). */
export function emitChannelAutoDisabled(
  trx: Db,
  channel: { channelId: string; provider: string; reason: string; statusCode?: number },
  now: number,
): Promise<string | undefined> {
  return emitEvent(
    trx,
    {
      type: 'channel.auto_disabled',
      data: { channel_id: channel.channelId, provider: channel.provider, reason: channel.reason, status_code: channel.statusCode ?? null },
    },
    now,
  );
}
