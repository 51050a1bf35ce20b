import { useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import { consoleHref, followLink } from '../navigation';
import { promptRulesChange, ruleFieldsOf } from '../prompt-rule-fields';
import { PromptRulesEditor } from '../prompt-rules';
import type { Session } from '../session';
import { EnableToggle, ErrorNote, Field, FilterBar, NextPage, OnceSecret, Opener, PanelForm, QuotaFields, RowButton, Select, Table, formatTime, listOf, useAction, useForm, useLoad } from '../ui';
import { Sparkline, useKeySparklines } from './usage';

type Key = Schemas['Key'];

const STATUSES: Array<[string, string]> = [
  ['', 'Any'],
  ['active', 'Active'],
  ['disabled', 'Disabled'],
  ['expired', 'Expired'],
];

/** "team=design, env=prod" into metadata. */
function metadataOf(text: string): Record<string, string> {
  return Object.fromEntries(
    listOf(text).map((pair) => {
      const at = pair.indexOf('=');
      return at < 0 ? [pair, ''] : [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
    }),
  );
}
/** A key's project: a link that opens it on the Projects page when the session may read projects, else its id. */
function ProjectCell({ projectId, linked }: { projectId: string | null; linked: boolean }) {
  if (projectId === null) return <td>—</td>;
  const to = `projects#${projectId}`;
  return (
    <td>
      {linked ? (
        <a href={consoleHref(to)} onClick={(event) => followLink(event, to)}>
          <code>{projectId}</code>
        </a>
      ) : (
        <code>{projectId}</code>
      )}
    </td>
  );
}

const metadataText = (metadata: Record<string, string> | undefined) =>
  Object.entries(metadata ?? {})
    .map(([name, value]) => `${name}=${value}`)
    .join(', ');

function CreateKeyForm({ onCreated, onCancel }: { onCreated: (created: Schemas['CreatedKey']) => void; onCancel: () => void }) {
  const [form, set] = useForm({ name: '', owner: '', credits: '100', period: '30', rpm: '30', providers: 'local', models: '', metadata: '', expires: '' });
  const create = async () => {
    const body: Schemas['CreateKeyRequest'] = {
      name: form.name,
      owner: form.owner,
      credits_quota: Number(form.credits),
      quota_period_days: Number(form.period),
      rate_limit_rpm: Number(form.rpm),
      ...(form.providers ? { allowed_providers: listOf(form.providers) } : {}),
      ...(form.models ? { allowed_models: listOf(form.models) } : {}),
      ...(form.metadata ? { metadata: metadataOf(form.metadata) } : {}),
      ...(form.expires ? { expires_in_days: Number(form.expires) } : {}),
    };
    onCreated(dataOf(await api.POST('/admin/keys', { body })));
  };
  return (
    <PanelForm title="Create key" submit="Create" onCancel={onCancel} action={create}>
      <div class="grid">
        <Field label="Name" value={form.name} onInput={set('name')} required />
        <Field label="Owner" value={form.owner} onInput={set('owner')} required />
        <Field label="Credits per period" type="number" min={0} value={form.credits} onInput={set('credits')} required />
        <Field label="Period (days)" type="number" min={1} value={form.period} onInput={set('period')} required />
        <Field label="Requests per minute" type="number" min={1} value={form.rpm} onInput={set('rpm')} />
        <Field label="Allowed providers" value={form.providers} onInput={set('providers')} hint="Comma-separated, e.g. local, jimeng. Empty: jimeng only, the default, which cannot use local-1 (the built-in renderer: provider local)" />
        <Field label="Allowed models" value={form.models} onInput={set('models')} hint="Comma-separated; empty: every model" />
        <Field label="Metadata" value={form.metadata} onInput={set('metadata')} hint="name=value, comma-separated" />
        <Field label="Expires in (days)" type="number" min={1} value={form.expires} onInput={set('expires')} hint="Empty: never" />
      </div>
    </PanelForm>
  );
}

function PolicyForm({ keyRecord, onSaved }: { keyRecord: Key; onSaved: () => void }) {
  const [form, set] = useForm({
    name: keyRecord.name,
    owner: keyRecord.owner,
    rpm: String(keyRecord.rate_limit_rpm),
    maxConcurrent: keyRecord.max_concurrent === null ? '' : String(keyRecord.max_concurrent),
    providers: keyRecord.allowed_providers.join(', '),
    models: (keyRecord.allowed_models ?? []).join(', '),
    ips: (keyRecord.allowed_ips ?? []).join(', '),
    metadata: metadataText(keyRecord.metadata),
    ...ruleFieldsOf(keyRecord.prompt_rules),
  });
  const save = async () => {
    const models = listOf(form.models);
    const ips = listOf(form.ips);
    await dataOf(
      await api.PATCH('/admin/keys/{id}', {
        params: { path: { id: keyRecord.id } },
        body: {
          name: form.name,
          owner: form.owner,
          rate_limit_rpm: Number(form.rpm),
          max_concurrent: form.maxConcurrent ? Number(form.maxConcurrent) : null,
          allowed_providers: listOf(form.providers),
          allowed_models: models.length > 0 ? models : null,
          allowed_ips: ips.length > 0 ? ips : null,
          metadata: metadataOf(form.metadata),
          // Sent only when changed: unchanged rules keep their ids and are not checked again.
          ...promptRulesChange(form, keyRecord.prompt_rules),
        },
      }),
    );
    onSaved();
  };
  return (
    <PanelForm title={`Policy of ${keyRecord.name}`} submit="Save policy" action={save}>
      <div class="grid">
        <Field label="Name" value={form.name} onInput={set('name')} required />
        <Field label="Owner" value={form.owner} onInput={set('owner')} required />
        <Field label="Requests per minute" type="number" min={1} value={form.rpm} onInput={set('rpm')} />
        <Field label="Max concurrent" type="number" min={1} value={form.maxConcurrent} onInput={set('maxConcurrent')} hint="Empty: no limit" />
        <Field label="Allowed providers" value={form.providers} onInput={set('providers')} />
        <Field label="Allowed models" value={form.models} onInput={set('models')} hint="Empty: every model" />
        <Field label="Allowed IPs" value={form.ips} onInput={set('ips')} hint="CIDRs; empty: any address" />
        <Field label="Metadata" value={form.metadata} onInput={set('metadata')} hint="name=value, comma-separated" />
      </div>
      <PromptRulesEditor fields={form} set={set} note="The key's own: its project's rules apply too." />
    </PanelForm>
  );
}

function QuotaForm({ keyRecord, onSaved }: { keyRecord: Key; onSaved: () => void }) {
  const [credits, setCredits] = useState(String(keyRecord.credits_quota));
  const [period, setPeriod] = useState(String(keyRecord.quota_period_days));
  const [reset, setReset] = useState(false);
  const save = async () => {
    await dataOf(
      await api.POST('/admin/keys/{id}/quota', {
        params: { path: { id: keyRecord.id } },
        body: { credits_quota: Number(credits), quota_period_days: Number(period), reset_usage: reset },
      }),
    );
    onSaved();
  };
  return (
    <PanelForm title={`Quota of ${keyRecord.name}`} submit="Set quota" action={save}>
      <p>
        Used {keyRecord.credits_used} of {keyRecord.credits_quota} credits this period (resets {formatTime(keyRecord.period_resets_at)}).
      </p>
      <QuotaFields credits={credits} period={period} reset={reset} onCredits={setCredits} onPeriod={setPeriod} onReset={setReset} />
    </PanelForm>
  );
}

export function KeysPage({ session }: { session: Session }) {
  const [filters, set] = useForm({ owner: '', status: '', metadata: '' });
  const [applied, setApplied] = useState(filters);
  const [cursor, setCursor] = useState<string | undefined>();
  const [secret, setSecret] = useState<{ label: string; value: string }>();
  const [editing, setEditing] = useState<{ id: string; form: 'policy' | 'quota' }>();
  const [actionError, run] = useAction();
  const writable = session.can('keys:write');
  const keys = useLoad(
    async () =>
      dataOf(
        await api.GET('/admin/keys', {
          params: {
            query: {
              limit: 50,
              ...(applied.owner ? { owner: applied.owner } : {}),
              ...(applied.status ? { status: applied.status as Schemas['KeyStatus'] } : {}),
              ...(applied.metadata ? { metadata: applied.metadata } : {}),
              ...(cursor ? { cursor } : {}),
            },
          },
        }),
      ),
    [applied, cursor],
  );
  const setStatus = (key: Key, status: 'active' | 'disabled') =>
    run(async () => {
      if (status === 'disabled') dataOf(await api.DELETE('/admin/keys/{id}', { params: { path: { id: key.id } } }));
      else dataOf(await api.PATCH('/admin/keys/{id}', { params: { path: { id: key.id } }, body: { status: 'active' } }));
      keys.reload();
    });
  const rotate = (key: Key) =>
    run(async () => {
      if (!window.confirm(`Rotate the secret of ${key.name}? The current secret stops working at once.`)) return;
      const rotated = dataOf(await api.POST('/admin/keys/{id}/rotate', { params: { path: { id: key.id } } }));
      setSecret({ label: 'New key', value: rotated.key });
      keys.reload();
    });
  const editingKey = keys.data?.data.find((k) => k.id === editing?.id);
  const showUsage = session.can('usage:read');
  const projectsReadable = session.can('projects:read');
  const sparklines = useKeySparklines(showUsage ? (keys.data?.data ?? []).map((k) => k.id) : []);
  const saved = () => {
    setEditing(undefined);
    keys.reload();
  };
  return (
    <>
      <FilterBar
        label="Search keys"
        submit="Search"
        onApply={() => {
          setCursor(undefined);
          setApplied(filters);
        }}
      >
        <Field label="Owner" value={filters.owner} onInput={set('owner')} />
        <Select label="Status" value={filters.status} options={STATUSES} onChange={set('status')} />
        <Field label="Metadata" value={filters.metadata} placeholder="team:design" onInput={set('metadata')} />
      </FilterBar>
      <Opener label="Create key" allowed={writable}>
        {(close) => (
          <CreateKeyForm
            onCancel={close}
            onCreated={(created) => {
              close();
              setSecret({ label: 'New key', value: created.key });
              keys.reload();
            }}
          />
        )}
      </Opener>
      {secret && <OnceSecret label={secret.label} value={secret.value} onDismiss={() => setSecret(undefined)} />}
      <ErrorNote message={keys.error ?? actionError} />
      <Table
        caption="Client keys"
        columns={['Name', 'Owner', 'Project', 'Status', 'Credits used', 'RPM', 'Hint', 'Last used', showUsage && 'Last 30 days', writable && 'Actions']}
        rows={keys.data?.data}
        loading={keys.loading}
        empty="No keys match."
      >
        {(key) => (
          <tr key={key.id} data-key-id={key.id}>
            <th scope="row">{key.name}</th>
            <td>{key.owner}</td>
            <ProjectCell projectId={key.project_id} linked={projectsReadable} />
            <td>
              <span class={`badge ${key.status}`}>{key.status}</span>
            </td>
            <td>
              {key.credits_used} / {key.credits_quota}
            </td>
            <td>{key.rate_limit_rpm}</td>
            <td>
              <code>{key.hint}</code>
            </td>
            <td>{formatTime(key.last_used_at)}</td>
            {showUsage && (
              <td>
                <Sparkline values={sparklines?.get(key.id)} name={key.name} />
              </td>
            )}
            {writable && (
              <td class="row-actions">
                <RowButton label="Edit policy" of={key.name} onClick={() => setEditing({ id: key.id, form: 'policy' })} />
                <RowButton label="Quota" of={key.name} onClick={() => setEditing({ id: key.id, form: 'quota' })} />
                <RowButton label="Rotate" of={key.name} onClick={() => rotate(key)} />
                <EnableToggle enabled={key.status !== 'disabled'} of={key.name} onChange={(on) => setStatus(key, on ? 'active' : 'disabled')} />
              </td>
            )}
          </tr>
        )}
      </Table>
      <NextPage label="Next page" next={keys.data?.next_cursor} onNext={setCursor} />
      {editingKey && editing?.form === 'policy' && <PolicyForm key={editingKey.id} keyRecord={editingKey} onSaved={saved} />}
      {editingKey && editing?.form === 'quota' && <QuotaForm key={editingKey.id} keyRecord={editingKey} onSaved={saved} />}
    </>
  );
}
