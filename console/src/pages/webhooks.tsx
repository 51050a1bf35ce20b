import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { Checkbox, EnableToggle, ErrorNote, Field, Notice, OnceSecret, Opener, PanelForm, RowButton, Table, formatTime, useAction, useLoad } from '../ui';

type Endpoint = Schemas['WebhookEndpoint'];
type EventType = Schemas['EventType'];

const EVENT_TYPES: EventType[] = ['key.quota.threshold_reached', 'key.quota.exhausted', 'key.expiring', 'key.expired', 'key.disabled', 'channel.auto_disabled'];

function AddEndpointForm({ onAdded, onCancel }: { onAdded: (created: Schemas['WebhookEndpointWithSecret']) => void; onCancel: () => void }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<EventType[]>(['key.quota.exhausted']);
  return (
    <PanelForm
      title="Add endpoint"
      submit="Add"
      onCancel={onCancel}
      action={async () => onAdded(dataOf(await api.POST('/admin/webhooks', { body: { url, event_types: events, description } })))}
    >
      <div class="grid">
        <Field label="URL" type="url" value={url} onInput={setUrl} required />
        <Field label="Description" value={description} onInput={setDescription} />
      </div>
      <fieldset>
        <legend>Events</legend>
        {EVENT_TYPES.map((type) => (
          <Checkbox key={type} label={type} checked={events.includes(type)} onChange={(on) => setEvents(on ? [...events, type] : events.filter((t) => t !== type))} />
        ))}
      </fieldset>
    </PanelForm>
  );
}

function Deliveries({ endpoint }: { endpoint: Endpoint }) {
  const deliveries = useLoad(async () => dataOf(await api.GET('/admin/webhooks/{id}/deliveries', { params: { path: { id: endpoint.id }, query: { limit: 20 } } })).data, [endpoint.id]);
  return (
    <section class="panel" aria-label={`Deliveries to ${endpoint.url}`}>
      <h2>Deliveries to {endpoint.url}</h2>
      <button type="button" class="secondary" onClick={deliveries.reload}>
        Refresh deliveries
      </button>
      <ErrorNote message={deliveries.error} />
      <Table caption="Deliveries" columns={['Event', 'Status', 'Attempts', 'Last answer', 'Created']} rows={deliveries.data} empty="No deliveries yet.">
        {(delivery) => (
          <tr key={delivery.id}>
            <th scope="row">{delivery.event_type}</th>
            <td>
              <span class={`badge ${delivery.status}`}>{delivery.status}</span>
            </td>
            <td>{delivery.attempts}</td>
            <td>{delivery.last_status_code ?? delivery.last_error ?? '—'}</td>
            <td>{formatTime(delivery.created_at)}</td>
          </tr>
        )}
      </Table>
    </section>
  );
}

export function WebhooksPage({ session }: { session: Session }) {
  const endpoints = useLoad(async () => dataOf(await api.GET('/admin/webhooks')).data, []);
  const [secret, setSecret] = useState<string>();
  const [selected, setSelected] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [actionError, run] = useAction();
  const writable = session.can('webhooks:write');
  const sendTest = (endpoint: Endpoint) =>
    run(async () => {
      const queued = dataOf(await api.POST('/admin/webhooks/{id}/test', { params: { path: { id: endpoint.id } } }));
      setNotice(`Test event ${queued.event_id} queued for ${endpoint.url}.`);
      setSelected(endpoint.id);
    });
  const rotate = (endpoint: Endpoint) =>
    run(async () => {
      const rotated = dataOf(await api.POST('/admin/webhooks/{id}/rotate-secret', { params: { path: { id: endpoint.id } }, body: {} }));
      setSecret(rotated.secret);
      endpoints.reload();
    });
  const setStatus = (endpoint: Endpoint, status: 'enabled' | 'disabled') =>
    run(async () => {
      dataOf(await api.PATCH('/admin/webhooks/{id}', { params: { path: { id: endpoint.id } }, body: { status } }));
      endpoints.reload();
    });
  const selectedEndpoint = endpoints.data?.find((e) => e.id === selected);
  return (
    <>
      <Opener label="Add endpoint" allowed={writable}>
        {(close) => (
          <AddEndpointForm
            onCancel={close}
            onAdded={(created) => {
              close();
              setSecret(created.secret);
              endpoints.reload();
            }}
          />
        )}
      </Opener>
      {secret && <OnceSecret label="Signing secret" value={secret} onDismiss={() => setSecret(undefined)} />}
      {notice && <Notice>{notice}</Notice>}
      <ErrorNote message={endpoints.error ?? actionError} />
      <Table caption="Webhook endpoints" columns={['URL', 'Events', 'Status', 'Failing since', 'Actions']} rows={endpoints.data} loading={endpoints.loading} empty="No endpoints.">
        {(endpoint) => (
          <tr key={endpoint.id}>
            <th scope="row">{endpoint.url}</th>
            <td>{endpoint.event_types.join(', ')}</td>
            <td>
              <span class={`badge ${endpoint.status}`}>{endpoint.status}</span>
              {endpoint.disabled_reason && <small> {endpoint.disabled_reason}</small>}
            </td>
            <td>{formatTime(endpoint.failing_since)}</td>
            <td class="row-actions">
              <RowButton label="Deliveries" of={endpoint.url} onClick={() => setSelected(endpoint.id)} />
              {writable && (
                <>
                  <RowButton label="Send test" of={endpoint.url} onClick={() => sendTest(endpoint)} />
                  <RowButton label="Rotate secret" of={endpoint.url} onClick={() => rotate(endpoint)} />
                  <EnableToggle enabled={endpoint.status === 'enabled'} of={endpoint.url} onChange={(on) => setStatus(endpoint, on ? 'enabled' : 'disabled')} />
                </>
              )}
            </td>
          </tr>
        )}
      </Table>
      {selectedEndpoint && <Deliveries key={selectedEndpoint.id} endpoint={selectedEndpoint} />}
    </>
  );
}
