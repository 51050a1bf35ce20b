import { gatewayOperations } from '../../generated/gateway.operations';
import { auditContextOf } from '../audit/audit-log';
import type { GatewayHandlers } from '../http/handler-maps';
import { fillPath } from '../http/operation-path';
import type { ProjectsService } from './projects.service';

type ProjectHandlers = Pick<
  GatewayHandlers,
  | 'createProject'
  | 'listProjects'
  | 'getProject'
  | 'updateProject'
  | 'disableProject'
  | 'setProjectQuota'
  | 'rotateProjectModerationHookSecret'
  | 'listProjectKeys'
>;

/** The /admin/projects operations: each a thin call into ProjectsService (mutations carry the audit context). */
export function projectHandlers(projects: ProjectsService): ProjectHandlers {
  return {
    createProject: async (request) => {
      const created = await projects.createProject(request.body, auditContextOf(request), request.principal.scopes);
      return { status: 201, headers: { Location: fillPath(gatewayOperations.getProject.path, { id: created.id }) }, body: created };
    },
    listProjects: async ({ query }) => ({ status: 200, body: await projects.listProjects(query) }),
    getProject: async ({ params }) => ({ status: 200, body: await projects.getProject(params.id) }),
    updateProject: async (request) => ({
      status: 200,
      body: await projects.updateProject(request.params.id, request.body, auditContextOf(request), request.principal.scopes),
    }),
    disableProject: async (request) => ({ status: 200, body: await projects.disableProject(request.params.id, auditContextOf(request)) }),
    setProjectQuota: async (request) => ({ status: 200, body: await projects.setQuota(request.params.id, request.body, auditContextOf(request)) }),
    rotateProjectModerationHookSecret: async (request) => ({
      status: 200,
      body: await projects.rotateModerationHookSecret(request.params.id, request.body?.overlap_seconds ?? 86_400, auditContextOf(request)),
    }),
    listProjectKeys: async ({ params, query }) => ({ status: 200, body: await projects.listProjectKeys(params.id, query) }),
  };
}
