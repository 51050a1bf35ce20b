import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { ErrorNote, Field, FilterBar, NextPage, Table, formatTime, useForm, useLoad } from '../ui';

type AuditEvent = Schemas['AuditEvent'];

/** A field's value as read: lists comma-separated, name=value pairs, nothing as "none"; deeper nesting as JSON. */
function valueText(value: unknown): string {
  if (value === null || value === undefined) return 'none';
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.map(valueText).join(', ');
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return 'none';
    return entries.map(([name, inner]) => `${name}=${inner !== null && typeof inner === 'object' ? JSON.stringify(inner) : String(inner)}`).join(', ');
  }
  return String(value);
}

const fieldsOf = (value: unknown): Record<string, unknown> => (value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {});

/** One line per changed field: "name: before → after", or its value alone when the event has only one side. */
function changesOf(event: AuditEvent): string[] {
  const before = fieldsOf(event.before);
  const after = fieldsOf(event.after);
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  return names.map((name) => {
    if (!(name in before)) return `${name}: ${valueText(after[name])}`;
    if (!(name in after)) return `${name}: ${valueText(before[name])} (removed)`;
    return `${name}: ${valueText(before[name])} → ${valueText(after[name])}`;
  });
}

function Changes({ event }: { event: AuditEvent }) {
  const lines = changesOf(event);
  if (lines.length === 0) return <td>—</td>;
  return (
    <td class="changes">
      <ul>
        {lines.map((line) => (
          <li key={line}>{line}</li>
        ))}
      </ul>
    </td>
  );
}

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
      <Table caption="Audit events" columns={['When', 'Actor', 'Action', 'Target', 'Changes', 'From']} rows={events.data?.data} loading={events.loading} empty="No events match.">
        {(event) => (
          <tr key={event.id}>
            <th scope="row">{formatTime(event.created_at)}</th>
            <td>{event.actor}</td>
            <td>{event.action}</td>
            <td>
              <code>{event.target}</code>
            </td>
            <Changes event={event} />
            <td>{event.client_ip}</td>
          </tr>
        )}
      </Table>
      <NextPage label="Older events" next={events.data?.next_cursor} onNext={setCursor} />
    </>
  );
}
