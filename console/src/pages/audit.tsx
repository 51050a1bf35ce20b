import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { ErrorNote, Field, FilterBar, NextPage, Table, formatTime, useForm, useLoad } from '../ui';

const json = (value: unknown) => (value === null || value === undefined ? '—' : JSON.stringify(value));

export function AuditPage(_props: { session: Session }) {
  const [filters, set] = useForm({ actor: '', target: '', action: '', after: '' });
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
  return (
    <>
      <FilterBar
        label="Filter audit events"
        submit="Filter"
        onApply={() => {
          setCursor(undefined);
          setApplied(filters);
        }}
      >
        <Field label="Actor" value={filters.actor} onInput={set('actor')} placeholder="root or adt_…" />
        <Field label="Target" value={filters.target} onInput={set('target')} placeholder="key_…" />
        <Field label="Action" value={filters.action} onInput={set('action')} placeholder="key.updated" />
        <Field label="Since" type="datetime-local" value={filters.after} onInput={set('after')} />
      </FilterBar>
      <ErrorNote message={events.error} />
      <Table caption="Audit events" columns={['When', 'Actor', 'Action', 'Target', 'Before', 'After', 'From']} rows={events.data?.data} empty="No events match.">
        {(event) => (
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
        )}
      </Table>
      <NextPage label="Older events" next={events.data?.next_cursor} onNext={setCursor} />
    </>
  );
}
