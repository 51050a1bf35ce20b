import { useState } from 'preact/hooks';
import { type AdminScope, type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import { Checkbox, ErrorNote, Field, OnceSecret, Opener, PanelForm, RowButton, Table, formatTime, useAction, useLoad } from '../ui';

function CreateTokenForm({ grantable, onCreated, onCancel }: { grantable: readonly AdminScope[]; onCreated: (created: Schemas['CreatedAdminToken']) => void; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [days, setDays] = useState('90');
  const [scopes, setScopes] = useState<AdminScope[]>([]);
  return (
    <PanelForm
      title="Create admin token"
      submit="Create token"
      incomplete={scopes.length === 0}
      onCancel={onCancel}
      action={async () => onCreated(dataOf(await api.POST('/admin/tokens', { body: { name, scopes, ...(days ? { expires_in_days: Number(days) } : {}) } })))}
    >
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
    </PanelForm>
  );
}

export function TokensPage({ session }: { session: Session }) {
  const tokens = useLoad(async () => dataOf(await api.GET('/admin/tokens', { params: { query: { limit: 100 } } })).data, []);
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
      <Opener label="Create admin token" allowed>
        {(close) => (
          <CreateTokenForm
            // A token may grant only the scopes it holds.
            grantable={session.identity.scopes}
            onCancel={close}
            onCreated={(created) => {
              close();
              setSecret(created.token);
              tokens.reload();
            }}
          />
        )}
      </Opener>
      {secret && <OnceSecret label="New admin token" value={secret} onDismiss={() => setSecret(undefined)} />}
      <ErrorNote message={tokens.error ?? actionError} />
      <Table caption="Admin tokens" columns={['Name', 'Scopes', 'Status', 'Created by', 'Expires', 'Actions']} rows={tokens.data} loading={tokens.loading}>
        {(token) => (
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
                <RowButton label="Revoke" of={token.name} danger onClick={() => revoke(token)} />
              )}
            </td>
          </tr>
        )}
      </Table>
    </>
  );
}
