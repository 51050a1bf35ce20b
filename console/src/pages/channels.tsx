import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { EnableToggle, ErrorNote, Field, Notice, Opener, PanelForm, RowButton, Select, Table, formatTime, listOf, useAction, useForm, useLoad } from '../ui';

type Channel = Schemas['Channel'];
type Transport = Schemas['CreateChannelRequest']['transport'];

const limit = (value: string) => (value ? Number(value) : null);
const limitText = (value: number | null) => (value === null ? '∞' : String(value));

function AddChannelForm({ onAdded, onCancel }: { onAdded: () => void; onCancel: () => void }) {
  const [form, set] = useForm({ name: '', provider: 'jimeng', transport: 'ark', baseUrl: '', models: '', priority: '0', weight: '1', maxConcurrency: '', rpm: '', ipm: '', apiKey: '', accessKeyId: '', secretAccessKey: '' });
  const visual = form.transport === 'visual';
  const add = async () => {
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
  };
  return (
    <PanelForm title="Add channel" submit="Add" onCancel={onCancel} action={add}>
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
        <RoutingFields form={form} set={set} />
        {visual ? (
          <>
            <Field label="Access key id" value={form.accessKeyId} onInput={set('accessKeyId')} required />
            <Field label="Secret access key" type="password" value={form.secretAccessKey} onInput={set('secretAccessKey')} required />
          </>
        ) : (
          <Field label="API key" type="password" value={form.apiKey} onInput={set('apiKey')} required />
        )}
      </div>
    </PanelForm>
  );
}

type Routing = { priority: string; weight: string; maxConcurrency: string; rpm: string; ipm: string };

/** A channel's routing and limits, the same fields when it is added and when it is edited; empty limits: none. */
function RoutingFields({ form, set }: { form: Routing; set: (field: keyof Routing) => (value: string) => void }) {
  return (
    <>
      <Field label="Priority" type="number" value={form.priority} onInput={set('priority')} />
      <Field label="Weight" type="number" min={1} value={form.weight} onInput={set('weight')} />
      <Field label="Max concurrency" type="number" min={1} value={form.maxConcurrency} onInput={set('maxConcurrency')} hint="Empty: no limit" />
      <Field label="Requests per minute" type="number" min={1} value={form.rpm} onInput={set('rpm')} hint="Empty: no limit" />
      <Field label="Images per minute" type="number" min={1} value={form.ipm} onInput={set('ipm')} hint="Empty: no limit" />
    </>
  );
}

function RoutingForm({ channel, onSaved }: { channel: Channel; onSaved: () => void }) {
  const [form, set] = useForm<Routing>({
    priority: String(channel.priority),
    weight: String(channel.weight),
    maxConcurrency: channel.max_concurrency === null ? '' : String(channel.max_concurrency),
    rpm: channel.rpm === null ? '' : String(channel.rpm),
    ipm: channel.ipm === null ? '' : String(channel.ipm),
  });
  const save = async () => {
    dataOf(
      await api.PATCH('/admin/channels/{id}', {
        params: { path: { id: channel.id } },
        body: { priority: Number(form.priority), weight: Number(form.weight), max_concurrency: limit(form.maxConcurrency), rpm: limit(form.rpm), ipm: limit(form.ipm) },
      }),
    );
    onSaved();
  };
  return (
    <PanelForm title={`Routing of ${channel.name}`} submit="Save routing" action={save}>
      <div class="grid">
        <RoutingFields form={form} set={set} />
      </div>
    </PanelForm>
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
      <Opener label="Add channel" allowed={writable}>
        {(close) => (
          <AddChannelForm
            onCancel={close}
            onAdded={() => {
              close();
              channels.reload();
            }}
          />
        )}
      </Opener>
      <ErrorNote message={channels.error ?? actionError} />
      <div class="actions">
        <button type="button" class="secondary small" onClick={channels.reload}>
          Refresh health
        </button>
      </div>
      <Table
        caption="Channels"
        columns={['Name', 'Provider / transport', 'Models', 'Health', 'Priority', 'Weight', 'Load vs limits', 'Last test', writable && 'Actions']}
        rows={channels.data}
        loading={channels.loading}
      >
        {(channel) => {
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
                  <RowButton label="Test" of={channel.name} onClick={() => test(channel)} />
                  {editable && (
                    <>
                      <RowButton label="Routing" of={channel.name} onClick={() => setEditing(channel.id)} />
                      <EnableToggle enabled={channel.status === 'enabled'} of={channel.name} onChange={(on) => setStatus(channel, on ? 'enabled' : 'disabled')} />
                    </>
                  )}
                </td>
              )}
            </tr>
          );
        }}
      </Table>
      {channels.data?.length === 0 && <Notice>No channels yet.</Notice>}
      <p class="hint">
        Only configured accounts are listed (GET /admin/channels): an environment account (Volcengine visual API, Ark, an OpenAI-compatible images API)
        appears here, read-only, once its environment variables are set.
      </p>
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
