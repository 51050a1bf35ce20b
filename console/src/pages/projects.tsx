import { useEffect, useState } from 'preact/hooks';
import { type Schemas, api, dataOf } from '../api';
import type { Session } from '../session';
import {
  EnableToggle,
  ErrorNote,
  Field,
  FilterBar,
  NextPage,
  Opener,
  PanelForm,
  RowButton,
  Select,
  Table,
  formatTime,
  useAction,
  useForm,
  useLoad,
} from '../ui';

type Project = Schemas['Project'];

const STATUSES: Array<[string, string]> = [
  ['', 'Any'],
  ['active', 'Active'],
  ['disabled', 'Disabled'],
];

/** The project the address's fragment names (`/console/projects#prj_…`, as the Keys page links it), if any. */
const projectInAddress = () => {
  const id = decodeURIComponent(window.location.hash.slice(1));
  return id.startsWith('prj_') ? id : undefined;
};

function CreateProjectForm({ onCreated, onCancel }: { onCreated: (created: Project) => void; onCancel: () => void }) {
  const [form, set] = useForm({ name: '', owner: '', credits: '1000', period: '30' });
  const create = async () => {
    const body: Schemas['CreateProjectRequest'] = {
      name: form.name,
      owner: form.owner,
      credits_quota: Number(form.credits),
      quota_period_days: Number(form.period),
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
      </div>
    </PanelForm>
  );
}

const orAll = (list: readonly string[] | null) => (list === null ? 'all (each key’s own list)' : list.join(', '));
const orNone = (limit: number | null) => (limit === null ? 'none (each key’s own)' : String(limit));

/** One project: its budget and guardrails, and its keys (listProjectKeys), a page at a time. */
function ProjectDetails({ project }: { project: Project }) {
  const [cursor, setCursor] = useState<string | undefined>();
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
        <dt>Created</dt>
        <dd>{formatTime(project.created_at)}</dd>
      </dl>
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
      {opened.data && <ProjectDetails key={opened.data.id} project={opened.data} />}
    </>
  );
}
