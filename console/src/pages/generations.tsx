import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { ErrorNote, Field, Notice, Select, formatTime, useAction } from '../ui';

type Generation = Schemas['ClientGeneration'];

const STATUSES: Array<[string, string]> = [['', 'Any'], ...(['queued', 'running', 'succeeded', 'failed', 'canceled'] as const).map((s): [string, string] => [s, s])];

/**
 * No admin operation lists or cancels generations: they are read as their key holder reads them
 * (GET /generations, POST /generations/{id}/cancel) with a client key the operator pastes here.
 * The key stays in this page's memory only.
 */
export function GenerationsPage(_props: { session: Session }) {
  const [clientKey, setClientKey] = useState('');
  const [status, setStatus] = useState('');
  const [generations, setGenerations] = useState<Generation[]>();
  const [error, run, busy] = useAction();
  const auth = () => ({ Authorization: `Bearer ${clientKey.trim()}` });
  const load = () =>
    run(async () => {
      const page = dataOf(await api.GET('/generations', { params: { query: { limit: 50, ...(status ? { status: status as Generation['status'] } : {}) } }, headers: auth() }));
      setGenerations(page.data);
    });
  const cancel = (generation: Generation) =>
    run(async () => {
      dataOf(await api.POST('/generations/{id}/cancel', { params: { path: { id: generation.id } }, headers: auth() }));
      const page = dataOf(await api.GET('/generations', { params: { query: { limit: 50, ...(status ? { status: status as Generation['status'] } : {}) } }, headers: auth() }));
      setGenerations(page.data);
    });
  return (
    <>
      <Notice>
        The admin API has no operation over all generations: paste a client key (hyai_…) to see and cancel that key's generations. The key is kept in this page's
        memory only.
      </Notice>
      <form
        class="filters"
        aria-label="Generations of a key"
        onSubmit={(event) => {
          event.preventDefault();
          void load();
        }}
      >
        <Field label="Client key" type="password" value={clientKey} onInput={setClientKey} required />
        <Select label="Status" value={status} options={STATUSES} onChange={setStatus} />
        <button type="submit" disabled={busy}>
          Show generations
        </button>
      </form>
      <ErrorNote message={error} />
      {generations && (
        <table>
          <caption class="visually-hidden">Generations</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Status</th>
              <th scope="col">Model</th>
              <th scope="col">Created</th>
              <th scope="col">Credits</th>
              <th scope="col">Images</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {generations.map((generation) => (
              <tr key={generation.id} data-generation-id={generation.id}>
                <th scope="row">
                  <code>{generation.id}</code>
                </th>
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
                <td>
                  {(generation.status === 'queued' || generation.status === 'running') && (
                    <button type="button" class="small danger" onClick={() => cancel(generation)}>
                      Cancel
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {generations?.length === 0 && <p>No generations.</p>}
    </>
  );
}
