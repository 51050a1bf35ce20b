import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { ErrorNote, Field, FormActions, Notice, Select, formatTime, listOf, useAction, useLoad } from '../ui';

type Channel = Schemas['Channel'];
type Transport = Schemas['CreateChannelRequest']['transport'];

const limit = (value: string) => (value ? Number(value) : null);
const limitText = (value: number | null) => (value === null ? '∞' : String(value));

function AddChannelForm({ onAdded, onCancel }: { onAdded: () => void; onCancel: () => void }) {
  const [form, setForm] = useState({ name: '', provider: 'jimeng', transport: 'ark', baseUrl: '', models: '', priority: '0', weight: '1', maxConcurrency: '', rpm: '', ipm: '', apiKey: '', accessKeyId: '', secretAccessKey: '' });
  const set = (field: keyof typeof form) => (value: string) => setForm({ ...form, [field]: value });
  const [error, run, busy] = useAction();
  const visual = form.transport === 'visual';
  const submit = (event: Event) => {
    event.preventDefault();
    return run(async () => {
      dataOf(
        await api.POST('/admin/channels', {
          body: {
            name: form.name,
            provider: form.provider,
            transport: form.transport as Transport,
            ...(form.baseUrl ? { base_url: form.baseUrl } : {}),
            models: listOf(form.models).map((model) => ({ model })),
            priority: Number(form.priority),
            weight: Number(form.weight),
            max_concurrency: limit(form.maxConcurrency),
            rpm: limit(form.rpm),
            ipm: limit(form.ipm),
            credentials: visual ? { access_key_id: form.accessKeyId, secret_access_key: form.secretAccessKey } : { api_key: form.apiKey },
          },
        }),
      );
      onAdded();
    });
  };
  return (
    <form class="panel" aria-label="Add channel" onSubmit={submit}>
      <h2>Add channel</h2>
      <div class="grid">
        <Field label="Name" value={form.name} onInput={set('name')} required />
        <Field label="Provider" value={form.provider} onInput={set('provider')} required />
        <Select
          label="Transport"
          value={form.transport}
          options={[
            ['ark', 'Ark'],
            ['visual', 'Volcengine visual API'],
            ['images-api', 'OpenAI-style images API'],
          ]}
          onChange={set('transport')}
        />
        <Field label="Base URL" value={form.baseUrl} onInput={set('baseUrl')} hint="Required for images-api; default endpoint otherwise" />
        <Field label="Models" value={form.models} onInput={set('models')} required hint="Catalog model ids, comma-separated" />
        <Field label="Priority" type="number" value={form.priority} onInput={set('priority')} />
        <Field label="Weight" type="number" min={1} value={form.weight} onInput={set('weight')} />
        <Field label="Max concurrency" type="number" min={1} value={form.maxConcurrency} onInput={set('maxConcurrency')} hint="Empty: no limit" />
        <Field label="Requests per minute" type="number" min={1} value={form.rpm} onInput={set('rpm')} hint="Empty: no limit" />
        <Field label="Images per minute" type="number" min={1} value={form.ipm} onInput={set('ipm')} hint="Empty: no limit" />
        {visual ? (
          <>
            <Field label="Access key id" value={form.accessKeyId} onInput={set('accessKeyId')} required />
            <Field label="Secret access key" type="password" value={form.secretAccessKey} onInput={set('secretAccessKey')} required />
          </>
        ) : (
          <Field label="API key" type="password" value={form.apiKey} onInput={set('apiKey')} required />
        )}
      </div>
      <FormActions submit="Add" busy={busy} error={error} onCancel={onCancel} />
    </form>
  );
}

function RoutingForm({ channel, onSaved }: { channel: Channel; onSaved: () => void }) {
  const [form, setForm] = useState({
    priority: String(channel.priority),
    weight: String(channel.weight),
    maxConcurrency: channel.max_concurrency === null ? '' : String(channel.max_concurrency),
    rpm: channel.rpm === null ? '' : String(channel.rpm),
    ipm: channel.ipm === null ? '' : String(channel.ipm),
  });
  const set = (field: keyof typeof form) => (value: string) => setForm({ ...form, [field]: value });
  const [error, run, busy] = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    return run(async () => {
      dataOf(
        await api.PATCH('/admin/channels/{id}', {
          params: { path: { id: channel.id } },
          body: { priority: Number(form.priority), weight: Number(form.weight), max_concurrency: limit(form.maxConcurrency), rpm: limit(form.rpm), ipm: limit(form.ipm) },
        }),
      );
      onSaved();
    });
  };
  return (
    <form class="panel" aria-label={`Routing of ${channel.name}`} onSubmit={submit}>
      <h2>Routing of {channel.name}</h2>
      <div class="grid">
        <Field label="Priority" type="number" value={form.priority} onInput={set('priority')} />
        <Field label="Weight" type="number" min={1} value={form.weight} onInput={set('weight')} />
        <Field label="Max concurrency" type="number" min={1} value={form.maxConcurrency} onInput={set('maxConcurrency')} hint="Empty: no limit" />
        <Field label="Requests per minute" type="number" min={1} value={form.rpm} onInput={set('rpm')} hint="Empty: no limit" />
        <Field label="Images per minute" type="number" min={1} value={form.ipm} onInput={set('ipm')} hint="Empty: no limit" />
      </div>
      <ErrorNote message={error} />
      <button type="submit" disabled={busy}>
        Save routing
      </button>
    </form>
  );
}

type Health = Schemas['ChannelHealth'];

/** Each channel with its live health (GET /admin/channels/{id}/health); a channel deleted meanwhile has none. */
async function channelsWithHealth(): Promise<Array<{ channel: Channel; health: Health | undefined }>> {
  const channels = dataOf(await api.GET('/admin/channels')).data;
  return Promise.all(
    channels.map(async (channel) => {
      const answer = await api.GET('/admin/channels/{id}/health', { params: { path: { id: channel.id } } });
      return { channel, health: answer.data };
    }),
  );
}

const used = (count: number, cap: number | null) => `${count} / ${limitText(cap)}`;

function HealthCell({ channel, health }: { channel: Channel; health: Health | undefined }) {
  return (
    <td>
      <span class={`badge ${channel.status}`}>{channel.status}</span>
      {channel.disabled_reason && <small> {channel.disabled_reason} ({formatTime(channel.disabled_at)})</small>}
      {health && (
        <small class="health">
          {' '}
          breaker {health.circuit.replace('_', '-')}
          {health.calls > 0 && `, ${Math.round(health.error_rate * 100)}% errors of ${health.calls}`}
          {health.latency_ms.p95 !== null && `, p95 ${Math.round(health.latency_ms.p95)} ms`}
          {health.cooling_down_until && `, cooling down until ${formatTime(health.cooling_down_until)}`}
        </small>
      )}
    </td>
  );
}

function LoadCell({ channel, health }: { channel: Channel; health: Health | undefined }) {
  if (!health) return <td>{`${limitText(channel.max_concurrency)} / ${limitText(channel.rpm)} / ${limitText(channel.ipm)}`}</td>;
  return (
    <td class="load">
      <span>{used(health.in_flight, health.max_concurrency)} in flight</span>
      <br />
      <span>{used(health.calls_this_minute, health.rpm)} calls/min</span>
      <br />
      <span>{used(health.images_this_minute, health.ipm)} images/min</span>
    </td>
  );
}

export function ChannelsPage({ session }: { session: Session }) {
  const listed = useLoad(channelsWithHealth, []);
  const channels = { ...listed, data: listed.data?.map((entry) => entry.channel) };
  const healthOf = (id: string) => listed.data?.find((entry) => entry.channel.id === id)?.health;
  const [adding, setAdding] = useState(false);
  const [editing, setEditing] = useState<string>();
  const [tests, setTests] = useState<Record<string, Schemas['ChannelTestResult']>>({});
  const [actionError, run] = useAction();
  const writable = session.can('channels:write');
  const test = (channel: Channel) =>
    run(async () => {
      const result = dataOf(await api.POST('/admin/channels/{id}/test', { params: { path: { id: channel.id } } }));
      setTests((previous) => ({ ...previous, [channel.id]: result }));
      channels.reload();
    });
  const setStatus = (channel: Channel, status: 'enabled' | 'disabled') =>
    run(async () => {
      dataOf(await api.PATCH('/admin/channels/{id}', { params: { path: { id: channel.id } }, body: { status } }));
      channels.reload();
    });
  const editingChannel = channels.data?.find((c) => c.id === editing);
  return (
    <>
      {writable && !adding && (
        <button type="button" onClick={() => setAdding(true)}>
          Add channel
        </button>
      )}
      {adding && (
        <AddChannelForm
          onCancel={() => setAdding(false)}
          onAdded={() => {
            setAdding(false);
            channels.reload();
          }}
        />
      )}
      <ErrorNote message={channels.error ?? actionError} />
      <div class="actions">
        <button type="button" class="secondary small" onClick={channels.reload}>
          Refresh health
        </button>
      </div>
      <table>
        <caption class="visually-hidden">Channels</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Provider / transport</th>
            <th scope="col">Models</th>
            <th scope="col">Health</th>
            <th scope="col">Priority</th>
            <th scope="col">Weight</th>
            <th scope="col">Load vs limits</th>
            <th scope="col">Last test</th>
            {writable && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {channels.data?.map((channel) => {
            const result = tests[channel.id];
            const editable = writable && channel.source === 'api';
            return (
              <tr key={channel.id} data-channel-id={channel.id}>
                <th scope="row">{channel.name}</th>
                <td>
                  {channel.provider} / {channel.transport}
                </td>
                <td>{channel.models.map((m) => m.model).join(', ')}</td>
                <HealthCell channel={channel} health={healthOf(channel.id)} />
                <td>{channel.priority}</td>
                <td>{channel.weight}</td>
                <LoadCell channel={channel} health={healthOf(channel.id)} />
                <td>{result ? <span role="status">{result.outcome === 'ok' ? `ok in ${result.latency_ms} ms` : `failed: ${result.error_code ?? ''} ${result.message ?? ''}`}</span> : '—'}</td>
                {writable && (
                  <td class="row-actions">
                    <button type="button" class="small" onClick={() => test(channel)}>
                      Test
                    </button>
                    {editable && (
                      <>
                        <button type="button" class="small" onClick={() => setEditing(channel.id)}>
                          Routing
                        </button>
                        {channel.status === 'enabled' ? (
                          <button type="button" class="small danger" onClick={() => setStatus(channel, 'disabled')}>
                            Disable
                          </button>
                        ) : (
                          <button type="button" class="small" onClick={() => setStatus(channel, 'enabled')}>
                            Enable
                          </button>
                        )}
                      </>
                    )}
                  </td>
                )}
              </tr>
            );
          })}
        </tbody>
      </table>
      {channels.data?.length === 0 && <Notice>No channels yet.</Notice>}
      {editingChannel && (
        <RoutingForm
          key={editingChannel.id}
          channel={editingChannel}
          onSaved={() => {
            setEditing(undefined);
            channels.reload();
          }}
        />
      )}
    </>
  );
}
