import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { ErrorNote, Field, FilterBar, NextPage, RowButton, Select, Table, formatTime, useAction, useForm, useLoad } from '../ui';

type Generation = Schemas['AdminGeneration'];
type Filters = { keyId: string; status: string; model: string };

const STATUSES: Array<[string, string]> = [['', 'Any'], ...(['queued', 'running', 'succeeded', 'failed', 'canceled'] as const).map((s): [string, string] => [s, s])];
const PAGE_SIZE = 50;

async function pageOf(filters: Filters, cursor?: string): Promise<Schemas['AdminGenerationList']> {
  const query = {
    limit: PAGE_SIZE,
    ...(filters.keyId ? { key_id: filters.keyId } : {}),
    ...(filters.status ? { status: filters.status as Generation['status'] } : {}),
    ...(filters.model ? { model: filters.model } : {}),
    ...(cursor ? { cursor } : {}),
  };
  return dataOf(await api.GET('/admin/generations', { params: { query } }));
}

/** Pages of GET /admin/keys read for the names of the keys generations name (the rest show their id). */
const KEY_NAME_PAGES = 10;

/** Key id → name, from the keys list (keys:read); empty without that scope. */
async function keyNames(session: Session): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  if (!session.can('keys:read')) return names;
  let cursor: string | undefined;
  for (let page = 0; page < KEY_NAME_PAGES; page++) {
    const keys = dataOf(await api.GET('/admin/keys', { params: { query: { limit: 100, ...(cursor ? { cursor } : {}) } } }));
    for (const key of keys.data) names.set(key.id, key.name);
    if (!keys.next_cursor) break;
    cursor = keys.next_cursor;
  }
  return names;
}

function KeyCell({ keyId, names }: { keyId: string | null; names: Map<string, string> | undefined }) {
  if (keyId === null) return <td>internal service</td>;
  const name = names?.get(keyId);
  return <td>{name ? <span title={keyId}>{name}</span> : <code>{keyId}</code>}</td>;
}

/** Every key's generations (GET /admin/generations), filtered by key, status and model; cancel with generations:write. */
export function GenerationsPage({ session }: { session: Session }) {
  const [form, set] = useForm<Filters>({ keyId: '', status: '', model: '' });
  const [filters, setFilters] = useState<Filters>(form);
  const [more, setMore] = useState<{ data: Generation[]; next: string | null }>();
  const first = useLoad(() => pageOf(filters), [filters]);
  const names = useLoad(() => keyNames(session), []);
  const [actionError, run, busy] = useAction();
  const writable = session.can('generations:write');
  const generations = [...(first.data?.data ?? []), ...(more?.data ?? [])];
  const next = more ? more.next : (first.data?.next_cursor ?? null);
  const reload = () => {
    setMore(undefined);
    first.reload();
  };
  const loadMore = (cursor: string) =>
    run(async () => {
      const page = await pageOf(filters, cursor);
      setMore({ data: [...(more?.data ?? []), ...page.data], next: page.next_cursor });
    });
  const cancel = (generation: Generation) =>
    run(async () => {
      dataOf(await api.POST('/admin/generations/{id}/cancel', { params: { path: { id: generation.id } } }));
      reload();
    });
  return (
    <>
      <FilterBar
        label="Filter generations"
        submit="Show generations"
        busy={busy}
        onApply={() => {
          setMore(undefined);
          setFilters({ keyId: form.keyId.trim(), status: form.status, model: form.model.trim() });
          if (JSON.stringify(form) === JSON.stringify(filters)) first.reload();
        }}
      >
        <Field label="Key id" value={form.keyId} onInput={set('keyId')} placeholder="key_…" />
        <Select label="Status" value={form.status} options={STATUSES} onChange={set('status')} />
        <Field label="Model" value={form.model} onInput={set('model')} />
      </FilterBar>
      <ErrorNote message={first.error ?? actionError} />
      <Table
        caption="Generations"
        columns={['Id', 'Key', 'Status', 'Model', 'Created', 'Credits', 'Images', writable && 'Actions']}
        rows={first.data ? generations : undefined}
        loading={first.loading}
        empty="No generations."
      >
        {(generation) => (
          <tr key={generation.id} data-generation-id={generation.id}>
            <th scope="row">
              <code>{generation.id}</code>
            </th>
            <KeyCell keyId={generation.key_id} names={names.data} />
            <td>
              <span class={`badge ${generation.status}`}>{generation.status}</span>
              {generation.error && <small> {generation.error.code}</small>}
            </td>
            <td>{generation.model}</td>
            <td>{formatTime(generation.created_at)}</td>
            <td>
              {generation.usage.credits_charged} charged, {generation.usage.credits_reserved} reserved
            </td>
            <td class="thumbs">
              {(generation.data ?? []).map((image, index) => {
                const source = image.url ?? (image.b64_json ? `data:image/png;base64,${image.b64_json}` : undefined);
                if (!source) return null;
                const alt = `Image ${index + 1} of ${generation.id}`;
                return image.url ? (
                  <a key={index} href={image.url} target="_blank" rel="noreferrer">
                    <img src={source} alt={alt} width={64} height={64} />
                  </a>
                ) : (
                  <img key={index} src={source} alt={alt} width={64} height={64} />
                );
              })}
            </td>
            {writable && (
              <td>
                {(generation.status === 'queued' || generation.status === 'running') && (
                  <RowButton label="Cancel" of={generation.id} danger onClick={() => cancel(generation)} />
                )}
              </td>
            )}
          </tr>
        )}
      </Table>
      <NextPage label="More generations" next={next} busy={busy} onNext={loadMore} />
    </>
  );
}
