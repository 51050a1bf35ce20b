import { useState } from 'preact/hooks';
import { type AdminScope, type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { Checkbox, ErrorNote, Field, FormActions, OnceSecret, formatTime, useAction, useLoad } from '../ui';

function CreateTokenForm({ grantable, onCreated, onCancel }: { grantable: readonly AdminScope[]; onCreated: (created: Schemas['CreatedAdminToken']) => void; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState('90');
  const [scopes, setScopes] = useState<AdminScope[]>([]);
  const [error, run, busy] = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    return run(async () => onCreated(dataOf(await api.POST('/admin/tokens', { body: { name, scopes, ...(days ? { expires_in_days: Number(days) } : {}) } }))));
  };
  return (
    <form class="panel" aria-label="Create admin token" onSubmit={submit}>
      <h2>Create admin token</h2>
      <div class="grid">
        <Field label="Token name" value={name} onInput={setName} required />
        <Field label="Expires in (days)" type="number" min={1} value={days} onInput={setDays} hint="Empty: never" />
      </div>
      <fieldset>
        <legend>Scopes</legend>
        {grantable.map((scope) => (
          <Checkbox key={scope} label={scope} checked={scopes.includes(scope)} onChange={(on) => setScopes(on ? [...scopes, scope] : scopes.filter((s) => s !== scope))} />
        ))}
      </fieldset>
      <FormActions submit="Create token" busy={busy || scopes.length === 0} error={error} onCancel={onCancel} />
    </form>
  );
}

export function TokensPage({ session }: { session: Session }) {
  const tokens = useLoad(async () => dataOf(await api.GET('/admin/tokens', { params: { query: { limit: 100 } } })).data, []);
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<string>();
  const [actionError, run] = useAction();
  const revoke = (token: Schemas['AdminToken']) =>
    run(async () => {
      if (!window.confirm(`Revoke ${token.name} and every token it created?`)) return;
      dataOf(await api.DELETE('/admin/tokens/{id}', { params: { path: { id: token.id } } }));
      tokens.reload();
    });
  return (
    <>
      {!creating && (
        <button type="button" onClick={() => setCreating(true)}>
          Create admin token
        </button>
      )}
      {creating && (
        <CreateTokenForm
          // A token may grant only the scopes it holds.
          grantable={session.identity.scopes}
          onCancel={() => setCreating(false)}
          onCreated={(created) => {
            setCreating(false);
            setSecret(created.token);
            tokens.reload();
          }}
        />
      )}
      {secret && <OnceSecret label="New admin token" value={secret} onDismiss={() => setSecret(undefined)} />}
      <ErrorNote message={tokens.error ?? actionError} />
      <table>
        <caption class="visually-hidden">Admin tokens</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Scopes</th>
            <th scope="col">Status</th>
            <th scope="col">Created by</th>
            <th scope="col">Expires</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {tokens.data?.map((token) => (
            <tr key={token.id}>
              <th scope="row">
                {token.name} <code>{token.hint}</code>
              </th>
              <td>{token.scopes.join(', ')}</td>
              <td>
                <span class={`badge ${token.status}`}>{token.status}</span>
              </td>
              <td>{token.created_by}</td>
              <td>{formatTime(token.expires_at)}</td>
              <td>
                {token.status === 'active' && (
                  <button type="button" class="small danger" onClick={() => revoke(token)}>
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
