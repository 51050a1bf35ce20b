import { type Command, InvalidArgumentError } from 'commander';
import type { components } from '../../../generated/gateway';
import { gatewayOperations } from '../../../generated/gateway.operations';
import { fillPath } from '../../http/operation-path';
import { callAdminApi } from '../admin-client';
import {
  type Clearable,
  commaList,
  defined,
  enableDisable,
  idCommand,
  orClear,
  pageOptions,
  repeatable,
  requireChange,
  wholeNumber,
  withQuery,
} from '../options';
import { print, printPage, record } from '../output';
import type { CommandContext } from '../command-context';
import { metadataEntry } from './keys';

type Schemas = components['schemas'];
type Project = Schemas['Project'];
type PromptRules = Schemas['PromptRules'];
type PromptRetention = Schemas['PromptRetention'];
type ModerationHookSettings = Schemas['ModerationHookSettings'];
type ProviderName = Schemas['ProviderName'];

const PROJECT_ID_HELP = 'project id (prj_...)';

/** A list, or "none" for no narrowing (null). */
const listOrNone = (what: string) => orClear('none', commaList(what));

/** --prompt-rules: a JSON array of rules as the API takes them; the API checks each rule. */
function promptRules(value: string): PromptRules {
  let rules: unknown;
  try {
    rules = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('must be a JSON array of rules, e.g. [{"kind":"blocked_term","term":"logo"}], or "none"');
  }
  if (!Array.isArray(rules)) throw new InvalidArgumentError('must be a JSON array of rules, e.g. [{"kind":"blocked_term","term":"logo"}], or "none"');
  return rules as PromptRules;
}

/** --prompt-retention: what its settled generations keep of their prompt. */
function promptRetention(value: string): PromptRetention {
  if (value === 'full' || value === 'hash' || value === 'none') return value;
  throw new InvalidArgumentError('must be full, hash or none, or "default" for the gateway\'s PROMPT_RETENTION');
}

const HOOK_EXAMPLE = '{"url":"https://moderation.example.com/hook","failure_mode":"fail_closed","timeout_ms":2000}';

/** --moderation-hook: the hook's settings as a JSON object, as the API takes them; the API checks them. */
function moderationHook(value: string): ModerationHookSettings {
  let hook: unknown;
  try {
    hook = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError(`must be a JSON object, e.g. ${HOOK_EXAMPLE}, or "none"`);
  }
  if (typeof hook !== 'object' || hook === null || Array.isArray(hook))
    throw new InvalidArgumentError(`must be a JSON object, e.g. ${HOOK_EXAMPLE}, or "none"`);
  return hook as ModerationHookSettings;
}

/** The limit and guardrail options createProject and updateProject share ("none" clears each). */
function limitOptions(command: Command): Command {
  return command
    .option('--rpm <n>', 'requests per minute across all its keys ("none" for no project limit)', orClear('none', wholeNumber))
    .option('--max-concurrent <n>', 'generations in flight at once across all its keys ("none" for no cap)', orClear('none', wholeNumber))
    .option('--providers <list>', 'providers its keys may use, on top of each key\'s own, comma-separated ("none" for no narrowing)', listOrNone('provider'))
    .option('--allowed-models <list>', 'catalog models its keys may use, comma-separated ("none" for no narrowing)', listOrNone('model'))
    .option(
      '--prompt-rules <json>',
      'prompt rules as a JSON array (each key\'s own rules add to them), e.g. \'[{"kind":"blocked_term","term":"logo"}]\' ("none" for no rules)',
      orClear('none', promptRules),
    )
    .option(
      '--prompt-retention <policy>',
      'what its settled generations keep of their prompt: full, hash (only its SHA-256) or none ("default" for the gateway\'s PROMPT_RETENTION)',
      orClear('default', promptRetention),
    )
    .option(
      '--moderation-hook <json>',
      `its moderation hook as a JSON object, e.g. '${HOOK_EXAMPLE}' (the secret is shown once, when a hook is first set; "none" removes it)`,
      orClear('none', moderationHook),
    )
    .option('--metadata <name=value>', 'a label of your own (repeat for more; replaces the whole map)', repeatable(metadataEntry));
}

interface LimitOptions {
  rpm?: Clearable<number>;
  maxConcurrent?: Clearable<number>;
  providers?: Clearable<string[]>;
  allowedModels?: Clearable<string[]>;
  promptRules?: Clearable<PromptRules>;
  promptRetention?: Clearable<PromptRetention>;
  moderationHook?: Clearable<ModerationHookSettings>;
  metadata?: Array<[string, string]>;
}

function limitFields(options: LimitOptions) {
  return defined({
    rate_limit_rpm: options.rpm,
    max_concurrent: options.maxConcurrent,
    // The API checks the provider names; the CLI passes them on as given.
    allowed_providers: options.providers as Clearable<ProviderName[]> | undefined,
    allowed_models: options.allowedModels,
    prompt_rules: options.promptRules,
    prompt_retention: options.promptRetention,
    moderation_hook: options.moderationHook,
    metadata: options.metadata === undefined ? undefined : Object.fromEntries(options.metadata),
  });
}

/** A project's fields, with its usage in the current period. */
function showProject(project: Project): string {
  const hook = project.moderation_hook;
  return record({
    id: project.id,
    name: project.name,
    owner: project.owner,
    status: project.status,
    credits: `${project.credits_used} used of ${project.credits_quota} (${project.credits_remaining} left), every ${project.quota_period_days} days`,
    period_resets_at: project.period_resets_at,
    rate_limit_rpm: project.rate_limit_rpm,
    max_concurrent: project.max_concurrent,
    allowed_providers: project.allowed_providers,
    allowed_models: project.allowed_models,
    prompt_rules: project.prompt_rules === null ? null : JSON.stringify(project.prompt_rules),
    prompt_retention: project.prompt_retention ?? "default (the gateway's PROMPT_RETENTION)",
    moderation_hook:
      hook === null
        ? null
        : `${hook.url} (${hook.failure_mode}, ${hook.timeout_ms} ms${hook.previous_secret_expires_at === null ? '' : `; the old secret signs too until ${hook.previous_secret_expires_at}`})`,
    // In the one answer that made it: the API never shows it again.
    ...(hook?.secret !== undefined ? { moderation_hook_secret: `${hook.secret} (shown once: store it now)` } : {}),
    metadata: Object.entries(project.metadata ?? {}).map(([name, value]) => `${name}=${value}`),
    created_at: project.created_at,
    disabled_at: project.disabled_at,
  });
}

// Paths come from the spec (generated/gateway.operations.ts), never written here.
const projectPath = (id: string) => fillPath(gatewayOperations.getProject.path, { id });

/** `projects ...`: every admin project operation of openapi/gateway.yaml. */
export function registerProjectCommands(program: Command, context: CommandContext): void {
  const projects = program.command('projects').description('create, inspect and manage projects (a shared budget and guardrails above keys)');

  limitOptions(
    projects
      .command('create')
      .description('create a project (keys join it with `keys create|update --project`)')
      .requiredOption('--name <name>', 'what the project is for')
      .requiredOption('--owner <owner>', 'who is responsible for it')
      .requiredOption('--credits <n>', 'credits all its keys may spend together per period', wholeNumber)
      .requiredOption('--period-days <n>', 'length of a quota period in days', wholeNumber),
  ).action(async (options: LimitOptions & { name: string; owner: string; credits: number; periodDays: number }, command: Command) => {
    const body: Schemas['CreateProjectRequest'] = {
      name: options.name,
      owner: options.owner,
      credits_quota: options.credits,
      quota_period_days: options.periodDays,
      ...limitFields(options),
    };
    const created = await callAdminApi<Project>(context.connection(command), 'POST', gatewayOperations.createProject.path, body);
    print(context.output(command), created, () => showProject(created));
  });

  pageOptions(
    projects
      .command('list')
      .description('list projects, newest first (a table; --json for the API answer)')
      .option('--owner <owner>', 'only this owner')
      .option('--status <status>', 'active or disabled'),
    'projects',
  ).action(async (options: { owner?: string; status?: string; limit?: number; cursor?: string }, command: Command) => {
    const page = await callAdminApi<Schemas['ProjectList']>(
      context.connection(command),
      'GET',
      withQuery(gatewayOperations.listProjects.path, { owner: options.owner, status: options.status, limit: options.limit, cursor: options.cursor }),
    );
    printPage(context.output(command), page, [
      ['id', (p) => p.id],
      ['name', (p) => p.name],
      ['owner', (p) => p.owner],
      ['status', (p) => p.status],
      ['credits', (p) => `${p.credits_used}/${p.credits_quota}`],
      ['period', (p) => `${p.quota_period_days}d`],
      ['rpm', (p) => p.rate_limit_rpm],
      ['providers', (p) => p.allowed_providers],
    ]);
  });

  idCommand(projects, 'get', 'show one project with its usage this period', PROJECT_ID_HELP, async (id, command) => {
    const project = await callAdminApi<Project>(context.connection(command), 'GET', projectPath(id));
    print(context.output(command), project, () => showProject(project));
  });

  limitOptions(
    projects
      .command('update')
      .description('change a project: name, owner, limits, providers, models, prompt rules, moderation hook, metadata, or enable/disable it')
      .argument('<id>', PROJECT_ID_HELP)
      .option('--name <name>', 'new name')
      .option('--owner <owner>', 'new owner')
      .option('--enable', 're-enable a disabled project')
      .option('--disable', 'disable the project (its keys are refused from their next request on)'),
  ).action(async (id: string, options: LimitOptions & { name?: string; owner?: string; enable?: boolean; disable?: boolean }, command: Command) => {
    const body: Schemas['UpdateProjectRequest'] = {
      ...defined({ name: options.name, owner: options.owner }),
      ...limitFields(options),
      ...enableDisable(command, options, 'active'),
    };
    requireChange(command, body);
    const project = await callAdminApi<Project>(context.connection(command), 'PATCH', projectPath(id), body);
    print(context.output(command), project, () => showProject(project));
  });

  idCommand(projects, 'enable', 're-enable a disabled project (same as update --enable)', PROJECT_ID_HELP, async (id, command) => {
    const body: Schemas['UpdateProjectRequest'] = { status: 'active' };
    const project = await callAdminApi<Project>(context.connection(command), 'PATCH', projectPath(id), body);
    print(context.output(command), project, () => showProject(project));
  });

  idCommand(
    projects,
    'disable',
    'disable a project (its keys are refused from their next request on; the records are kept)',
    PROJECT_ID_HELP,
    async (id, command) => {
      const project = await callAdminApi<Project>(context.connection(command), 'DELETE', fillPath(gatewayOperations.disableProject.path, { id }));
      print(context.output(command), project, () => showProject(project));
    },
  );

  projects
    .command('quota')
    .description("set a project's credits per period")
    .argument('<id>', PROJECT_ID_HELP)
    .requiredOption('--credits <n>', 'credits per period', wholeNumber)
    .option('--period-days <n>', 'new period length in days', wholeNumber)
    .option('--reset', 'also set the credits used this period to 0')
    .action(async (id: string, options: { credits: number; periodDays?: number; reset?: boolean }, command: Command) => {
      const body: Schemas['SetQuotaRequest'] = {
        credits_quota: options.credits,
        ...defined({ quota_period_days: options.periodDays }),
        ...(options.reset ? { reset_usage: true } : {}),
      };
      const project = await callAdminApi<Project>(context.connection(command), 'POST', fillPath(gatewayOperations.setProjectQuota.path, { id }), body);
      print(context.output(command), project, () => showProject(project));
    });

  projects
    .command('rotate-hook-secret')
    .description("replace the moderation hook's signing secret (printed once); the old one still signs for the overlap")
    .argument('<id>', PROJECT_ID_HELP)
    .option('--overlap-seconds <n>', 'how long the old secret still signs (default 86400)', wholeNumber)
    .action(async (id: string, options: { overlapSeconds?: number }, command: Command) => {
      const body: Schemas['RotateModerationHookSecretRequest'] = defined({ overlap_seconds: options.overlapSeconds });
      const project = await callAdminApi<Project>(
        context.connection(command),
        'POST',
        fillPath(gatewayOperations.rotateProjectModerationHookSecret.path, { id }),
        body,
      );
      print(context.output(command), project, () => showProject(project));
    });

  pageOptions(
    projects.command('keys').description("list a project's keys, newest first (a table; --json for the API answer)").argument('<id>', PROJECT_ID_HELP),
    'keys',
  ).action(async (id: string, options: { limit?: number; cursor?: string }, command: Command) => {
    const page = await callAdminApi<Schemas['KeyList']>(
      context.connection(command),
      'GET',
      withQuery(fillPath(gatewayOperations.listProjectKeys.path, { id }), { limit: options.limit, cursor: options.cursor }),
    );
    printPage(context.output(command), page, [
      ['id', (k) => k.id],
      ['name', (k) => k.name],
      ['owner', (k) => k.owner],
      ['status', (k) => k.status],
      ['credits', (k) => `${k.credits_used}/${k.credits_quota}`],
      ['period', (k) => `${k.quota_period_days}d`],
      ['expires', (k) => k.expires_at],
    ]);
  });
}
