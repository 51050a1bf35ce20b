import { useEffect, useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import { promptRulesChange, ruleFieldsOf } from '../prompt-rule-fields';
import { PromptRulesEditor } from '../prompt-rules';
import type { Session } from '../session';
import {
  EnableToggle,
  ErrorNote,
  Field,
  FilterBar,
  NextPage,
  OnceSecret,
  Opener,
  PanelForm,
  QuotaFields,
  RowButton,
  Select,
  Table,
  formatTime,
  listOf,
  useAction,
  useForm,
  useLoad,
} from '../ui';

type Project = Schemas['Project'];
type FailureMode = 'fail_open' | 'fail_closed';
/** A moderation hook's secret, shown once in the details of the project it was made for. */
type HookSecret = { projectId: string; value: string };

const STATUSES: Array<[string, string]> = [
  ['', 'Any'],
  ['active', 'Active'],
  ['disabled', 'Disabled'],
];

const RETENTIONS: Array<[string, string]> = [
  ['', 'Gateway default'],
  ['full', 'Full prompt'],
  ['hash', 'Hash only (SHA-256)'],
  ['none', 'None'],
];

const FAILURE_MODES: Array<[FailureMode, string]> = [
  ['fail_closed', 'Fail closed (refuse)'],
  ['fail_open', 'Fail open (go on)'],
];

/** The retention select's value ('' for the gateway's default) as the API has it. */
const retentionOf = (value: string): Schemas['ProjectPromptRetention'] => (value === 'full' || value === 'hash' || value === 'none' ? value : null);

/** The moderation hook as a form types it: an empty URL is no hook. */
interface HookInput {
  hookUrl: string;
  hookTimeout: string;
  hookFailureMode: string;
}

const hookInputOf = (hook: Project['moderation_hook']): HookInput => ({
  hookUrl: hook?.url ?? '',
  hookTimeout: String(hook?.timeout_ms ?? 2000),
  hookFailureMode: hook?.failure_mode ?? 'fail_closed',
});

const hookOf = (input: HookInput): Schemas['ModerationHookSettings'] => {
  const url = input.hookUrl.trim();
  if (url === '') return null;
  return {
    url,
    ...(input.hookTimeout ? { timeout_ms: Number(input.hookTimeout) } : {}),
    failure_mode: input.hookFailureMode === 'fail_open' ? 'fail_open' : 'fail_closed',
  };
};

/** The moderation hook's fields, in the create and the guardrails forms. */
function HookFields({ hook, set }: { hook: HookInput; set: (field: keyof HookInput) => (value: string) => void }) {
  return (
    <>
      <Field label="Moderation hook URL" type="url" value={hook.hookUrl} onInput={set('hookUrl')} hint="https; empty: no hook" />
      <Field label="Hook timeout (ms)" type="number" min={100} value={hook.hookTimeout} onInput={set('hookTimeout')} />
      <Select label="Hook failure mode" value={hook.hookFailureMode} options={FAILURE_MODES} onChange={set('hookFailureMode')} />
    </>
  );
}

/** The project the address's fragment names (`/console/projects#prj_…`, as the Keys page links it), if any. */
const projectInAddress = () => {
  const id = decodeURIComponent(window.location.hash.slice(1));
  return id.startsWith('prj_') ? id : undefined;
};

function CreateProjectForm({ onCreated, onCancel }: { onCreated: (created: Project) => void; onCancel: () => void }) {
  const [form, set] = useForm({ name: '', owner: '', credits: '1000', period: '30', retention: '', ...hookInputOf(null) });
  const create = async () => {
    const retention = retentionOf(form.retention);
    const hook = hookOf(form);
    const body: Schemas['CreateProjectRequest'] = {
      name: form.name,
      owner: form.owner,
      credits_quota: Number(form.credits),
      quota_period_days: Number(form.period),
      ...(retention !== null ? { prompt_retention: retention } : {}),
      ...(hook !== null ? { moderation_hook: hook } : {}),
    };
    onCreated(dataOf(await api.POST('/admin/projects', { body })));
  };
  return (
    <PanelForm title="Create project" submit="Create" onCancel={onCancel} action={create}>
      <div class="grid">
        <Field label="Name" value={form.name} onInput={set('name')} required />
        <Field label="Owner" value={form.owner} onInput={set('owner')} required />
        <Field
          label="Credits per period"
          type="number"
          min={0}
          value={form.credits}
          onInput={set('credits')}
          required
          hint="Shared by all the project's keys"
        />
        <Field label="Period (days)" type="number" min={1} value={form.period} onInput={set('period')} required />
        <Select label="Prompt retention" value={form.retention} options={RETENTIONS} onChange={set('retention')} />
        <HookFields hook={form} set={set} />
      </div>
    </PanelForm>
  );
}

/** Changes the project's limits, lists, prompt retention, prompt rules and moderation hook (updateProject). */
function GuardrailsForm({ project, onSaved }: { project: Project; onSaved: (saved: Project) => void }) {
  const [form, set] = useForm({
    rpm: project.rate_limit_rpm === null ? '' : String(project.rate_limit_rpm),
    maxConcurrent: project.max_concurrent === null ? '' : String(project.max_concurrent),
    providers: (project.allowed_providers ?? []).join(', '),
    models: (project.allowed_models ?? []).join(', '),
    retention: project.prompt_retention ?? '',
    ...hookInputOf(project.moderation_hook),
    ...ruleFieldsOf(project.prompt_rules),
  });
  const save = async () => {
    const providers = listOf(form.providers);
    const models = listOf(form.models);
    const hook = hookOf(form);
    // Sent only when changed: saving a limit neither rewrites the hook nor checks its URL again.
    const hookChanged = JSON.stringify(hook) !== JSON.stringify(hookOf(hookInputOf(project.moderation_hook)));
    const body: Schemas['UpdateProjectRequest'] = {
      rate_limit_rpm: form.rpm ? Number(form.rpm) : null,
      max_concurrent: form.maxConcurrent ? Number(form.maxConcurrent) : null,
      allowed_providers: providers.length > 0 ? providers : null,
      allowed_models: models.length > 0 ? models : null,
      prompt_retention: retentionOf(form.retention),
      ...(hookChanged ? { moderation_hook: hook } : {}),
      // Likewise the rules: unchanged, they keep their ids and are not checked again.
      ...promptRulesChange(form, project.prompt_rules),
    };
    onSaved(dataOf(await api.PATCH('/admin/projects/{id}', { params: { path: { id: project.id } }, body })));
  };
  return (
    <PanelForm title={`Guardrails of ${project.name}`} submit="Save guardrails" action={save}>
      <div class="grid">
        <Field label="Requests per minute" type="number" min={1} value={form.rpm} onInput={set('rpm')} hint="Across all its keys; empty: no project limit" />
        <Field label="Max concurrent" type="number" min={1} value={form.maxConcurrent} onInput={set('maxConcurrent')} hint="Empty: no project cap" />
        <Field label="Allowed providers" value={form.providers} onInput={set('providers')} hint="Comma-separated; empty: each key's own list" />
        <Field label="Allowed models" value={form.models} onInput={set('models')} hint="Comma-separated; empty: each key's own list" />
        <Select label="Prompt retention" value={form.retention} options={RETENTIONS} onChange={set('retention')} />
        <HookFields hook={form} set={set} />
      </div>
      <PromptRulesEditor fields={form} set={set} />
    </PanelForm>
  );
}

/** The project's credit quota (setProjectQuota), shared by all its keys. */
function ProjectQuotaForm({ project, onSaved }: { project: Project; onSaved: (saved: Project) => void }) {
  const [credits, setCredits] = useState(String(project.credits_quota));
  const [period, setPeriod] = useState(String(project.quota_period_days));
  const [reset, setReset] = useState(false);
  const save = async () => {
    onSaved(
      dataOf(
        await api.POST('/admin/projects/{id}/quota', {
          params: { path: { id: project.id } },
          body: { credits_quota: Number(credits), quota_period_days: Number(period), reset_usage: reset },
        }),
      ),
    );
    // The form stays open: a second save must not reset the period's usage again unasked.
    setReset(false);
  };
  return (
    <PanelForm title={`Quota of ${project.name}`} submit="Set quota" action={save}>
      <QuotaFields credits={credits} period={period} reset={reset} onCredits={setCredits} onPeriod={setPeriod} onReset={setReset} />
    </PanelForm>
  );
}

function describeRule(rule: Schemas['PromptRule']): string {
  switch (rule.kind) {
    case 'max_length':
      return `at most ${rule.max ?? '?'} characters`;
    case 'blocked_term':
      return `blocks “${rule.term ?? ''}”`;
    case 'blocked_pattern':
      return `blocks /${rule.pattern ?? ''}/`;
    case 'allow_list':
      return `allows only ${rule.patterns?.length ?? 0} pattern(s)`;
  }
}

const rulesText = (rules: Project['prompt_rules']) =>
  rules === null || rules.length === 0 ? 'none' : `${rules.length} rule(s): ${rules.map(describeRule).join('; ')}`;

const hookText = (hook: Project['moderation_hook']) =>
  hook === null
    ? 'none'
    : `${hook.url}, ${hook.timeout_ms} ms timeout, ${hook.failure_mode === 'fail_open' ? 'fails open' : 'fails closed'}` +
      (hook.previous_secret_expires_at === null ? '' : `; the old secret signs too until ${formatTime(hook.previous_secret_expires_at)}`);

const orAll = (list: readonly string[] | null) => (list === null ? 'all (each key’s own list)' : list.join(', '));
const orNone = (limit: number | null) => (limit === null ? 'none (each key’s own)' : String(limit));

/**
 * One project: its budget and guardrails, and its keys (listProjectKeys), a page at a time; with
 * `onSaved`, the forms that change them, and a new moderation hook's secret, once.
 */
function ProjectDetails({
  project,
  secret,
  onSaved,
  onSecretDismissed,
}: {
  project: Project;
  secret: string | undefined;
  onSaved: ((saved: Project) => void) | undefined;
  onSecretDismissed: () => void;
}) {
  const [cursor, setCursor] = useState<string | undefined>();
  const [rotateError, run] = useAction();
  // The new secret comes back as a made hook's does: shown once, through onSaved.
  const rotateHookSecret = (saved: (project: Project) => void) =>
    run(async () => saved(dataOf(await api.POST('/admin/projects/{id}/moderation-hook/rotate-secret', { params: { path: { id: project.id } }, body: {} }))));
  const keys = useLoad(
    async () =>
      dataOf(await api.GET('/admin/projects/{id}/keys', { params: { path: { id: project.id }, query: { limit: 50, ...(cursor ? { cursor } : {}) } } })),
    [project.id, cursor],
  );
  return (
    <section class="panel" aria-label={`Project ${project.name}`}>
      <h2>Project {project.name}</h2>
      <dl class="details">
        <dt>Id</dt>
        <dd>
          <code>{project.id}</code>
        </dd>
        <dt>Owner</dt>
        <dd>{project.owner}</dd>
        <dt>Status</dt>
        <dd>
          <span class={`badge ${project.status}`}>{project.status}</span>
          {project.disabled_at && <small> since {formatTime(project.disabled_at)}</small>}
        </dd>
        <dt>Credits</dt>
        <dd>
          {project.credits_used} used of {project.credits_quota} per {project.quota_period_days} days ({project.credits_remaining} left)
        </dd>
        <dt>Period</dt>
        <dd>
          {formatTime(project.period_started_at)} to {formatTime(project.period_resets_at)}
        </dd>
        <dt>Requests per minute</dt>
        <dd>{orNone(project.rate_limit_rpm)}</dd>
        <dt>Max concurrent</dt>
        <dd>{orNone(project.max_concurrent)}</dd>
        <dt>Allowed providers</dt>
        <dd>{orAll(project.allowed_providers)}</dd>
        <dt>Allowed models</dt>
        <dd>{orAll(project.allowed_models)}</dd>
        <dt>Prompt retention</dt>
        <dd>{project.prompt_retention ?? 'gateway default (PROMPT_RETENTION)'}</dd>
        <dt>Prompt rules</dt>
        <dd>{rulesText(project.prompt_rules)}</dd>
        <dt>Moderation hook</dt>
        <dd>{hookText(project.moderation_hook)}</dd>
        <dt>Created</dt>
        <dd>{formatTime(project.created_at)}</dd>
      </dl>
      {secret && <OnceSecret label="Moderation hook secret" value={secret} onDismiss={onSecretDismissed} />}
      {onSaved && project.moderation_hook !== null && (
        <div class="actions">
          <button type="button" class="secondary" onClick={() => rotateHookSecret(onSaved)}>
            Rotate hook secret
          </button>
          <small>A new secret, shown once; the old one also signs the hook's calls for a day.</small>
        </div>
      )}
      <ErrorNote message={rotateError} />
      {onSaved && (
        <>
          <GuardrailsForm project={project} onSaved={onSaved} />
          <ProjectQuotaForm project={project} onSaved={onSaved} />
        </>
      )}
      <ErrorNote message={keys.error} />
      <Table
        caption={`Keys of ${project.name}`}
        columns={['Key', 'Owner', 'Status', 'Credits used', 'Last used']}
        rows={keys.data?.data}
        loading={keys.loading}
        empty="No keys in this project."
      >
        {(key) => (
          <tr key={key.id} data-key-id={key.id}>
            <th scope="row">{key.name}</th>
            <td>{key.owner}</td>
            <td>
              <span class={`badge ${key.status}`}>{key.status}</span>
            </td>
            <td>
              {key.credits_used} / {key.credits_quota}
            </td>
            <td>{formatTime(key.last_used_at)}</td>
          </tr>
        )}
      </Table>
      <NextPage label={`Next page of keys of ${project.name}`} next={keys.data?.next_cursor} onNext={setCursor} />
    </section>
  );
}

export function ProjectsPage({ session }: { session: Session }) {
  const [filters, set] = useForm({ owner: '', status: '' });
  const [applied, setApplied] = useState(filters);
  const [cursor, setCursor] = useState<string | undefined>();
  const [selected, setSelected] = useState<string | undefined>(projectInAddress);
  const [hookSecret, setHookSecret] = useState<HookSecret>();
  const [actionError, run] = useAction();
  const writable = session.can('projects:write');
  const projects = useLoad(
    async () =>
      dataOf(
        await api.GET('/admin/projects', {
          params: {
            query: {
              limit: 50,
              ...(applied.owner ? { owner: applied.owner } : {}),
              ...(applied.status ? { status: applied.status as Schemas['ProjectStatus'] } : {}),
              ...(cursor ? { cursor } : {}),
            },
          },
        }),
      ),
    [applied, cursor],
  );
  // The opened project, fetched on its own: one the Keys page links to may be on no page of this list.
  const opened = useLoad(
    async () => (selected ? dataOf(await api.GET('/admin/projects/{id}', { params: { path: { id: selected } } })) : undefined),
    [selected],
  );
  useEffect(() => {
    // The fragment names the opened project, so that the address can be kept or shared.
    window.history.replaceState(null, '', selected ? `#${selected}` : window.location.pathname);
  }, [selected]);
  const setStatus = (project: Project, status: 'active' | 'disabled') =>
    run(async () => {
      if (status === 'disabled') dataOf(await api.DELETE('/admin/projects/{id}', { params: { path: { id: project.id } } }));
      else dataOf(await api.PATCH('/admin/projects/{id}', { params: { path: { id: project.id } }, body: { status: 'active' } }));
      projects.reload();
      if (project.id === selected) opened.reload();
    });
  /** A change made in the details: a hook made by it shows its secret; the list and the details read it again. */
  const saved = (project: Project) => {
    if (project.moderation_hook?.secret) setHookSecret({ projectId: project.id, value: project.moderation_hook.secret });
    projects.reload();
    opened.reload();
  };
  return (
    <>
      <FilterBar
        label="Search projects"
        submit="Search"
        onApply={() => {
          setCursor(undefined);
          setApplied(filters);
        }}
      >
        <Field label="Owner" value={filters.owner} onInput={set('owner')} />
        <Select label="Status" value={filters.status} options={STATUSES} onChange={set('status')} />
      </FilterBar>
      <Opener label="Create project" allowed={writable}>
        {(close) => (
          <CreateProjectForm
            onCancel={close}
            onCreated={(created) => {
              close();
              if (created.moderation_hook?.secret) setHookSecret({ projectId: created.id, value: created.moderation_hook.secret });
              projects.reload();
              setSelected(created.id);
            }}
          />
        )}
      </Opener>
      <ErrorNote message={projects.error ?? actionError} />
      <Table
        caption="Projects"
        columns={['Name', 'Owner', 'Status', 'Credits used', 'Period resets', 'Actions']}
        rows={projects.data?.data}
        loading={projects.loading}
        empty="No projects match."
      >
        {(project) => (
          <tr key={project.id} data-project-id={project.id}>
            <th scope="row">{project.name}</th>
            <td>{project.owner}</td>
            <td>
              <span class={`badge ${project.status}`}>{project.status}</span>
            </td>
            <td>
              {project.credits_used} / {project.credits_quota}
            </td>
            <td>{formatTime(project.period_resets_at)}</td>
            <td class="row-actions">
              <RowButton label="Details" of={project.name} onClick={() => setSelected(project.id)} />
              {writable && (
                <EnableToggle enabled={project.status === 'active'} of={project.name} onChange={(on) => setStatus(project, on ? 'active' : 'disabled')} />
              )}
            </td>
          </tr>
        )}
      </Table>
      <NextPage label="Next page" next={projects.data?.next_cursor} onNext={setCursor} />
      <ErrorNote message={opened.error} />
      {opened.data && (
        <ProjectDetails
          key={opened.data.id}
          project={opened.data}
          secret={hookSecret?.projectId === opened.data.id ? hookSecret.value : undefined}
          onSaved={writable ? saved : undefined}
          onSecretDismissed={() => setHookSecret(undefined)}
        />
      )}
    </>
  );
}
