import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { ErrorNote, Field, formatTime, useLoad } from '../ui';

const json = (value: unknown) => (value === null || value === undefined ? '—' : JSON.stringify(value));

export function AuditPage(_props: { session: Session }) {
  const [filters, setFilters] = useState({ actor: '', target: '', action: '', after: '' });
  const [applied, setApplied] = useState(filters);
  const [cursor, setCursor] = useState<string>();
  const events = useLoad(
    async () =>
      dataOf(
        await api.GET('/admin/audit-events', {
          params: {
            query: {
              limit: 50,
              ...(applied.actor ? { actor: applied.actor } : {}),
              ...(applied.target ? { target: applied.target } : {}),
              ...(applied.action ? { action: applied.action as Schemas['AuditAction'] } : {}),
              ...(applied.after ? { created_after: new Date(applied.after).toISOString() } : {}),
              ...(cursor ? { cursor } : {}),
            },
          },
        }),
      ),
    [applied, cursor],
  );
  const set = (field: keyof typeof filters) => (value: string) => setFilters({ ...filters, [field]: value });
  return (
    <>
      <form
        class="filters"
        aria-label="Filter audit events"
        onSubmit={(event) => {
          event.preventDefault();
          setCursor(undefined);
          setApplied(filters);
        }}
      >
        <Field label="Actor" value={filters.actor} onInput={set('actor')} placeholder="root or adt_…" />
        <Field label="Target" value={filters.target} onInput={set('target')} placeholder="key_…" />
        <Field label="Action" value={filters.action} onInput={set('action')} placeholder="key.updated" />
        <Field label="Since" type="datetime-local" value={filters.after} onInput={set('after')} />
        <button type="submit">Filter</button>
      </form>
      <ErrorNote message={events.error} />
      <table>
        <caption class="visually-hidden">Audit events</caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Actor</th>
            <th scope="col">Action</th>
            <th scope="col">Target</th>
            <th scope="col">Before</th>
            <th scope="col">After</th>
            <th scope="col">From</th>
          </tr>
        </thead>
        <tbody>
          {events.data?.data.map((event) => (
            <tr key={event.id}>
              <th scope="row">{formatTime(event.created_at)}</th>
              <td>{event.actor}</td>
              <td>{event.action}</td>
              <td>
                <code>{event.target}</code>
              </td>
              <td class="json">{json(event.before)}</td>
              <td class="json">{json(event.after)}</td>
              <td>{event.client_ip}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {events.data?.data.length === 0 && <p>No events match.</p>}
      {events.data?.next_cursor && (
        <button type="button" class="secondary" onClick={() => setCursor(events.data?.next_cursor ?? undefined)}>
          Older events
        </button>
      )}
    </>
  );
}
