import { type CatalogModel, upstreamLimitsOf } from '../config/catalog';
import { ApiError } from '../errors/api-error';
import { modelNotFound } from '../errors/unknown-model';
import { checkModelPermitted } from '../keys/key-policy';
import type { ClientKey } from '../keys/key.model';
import type { GatewayMetrics } from '../metrics/metrics';
import { projectRateLimited } from '../projects/project-policy';
import { formatForUpstreamModel } from '../providers/formats';
import type { ProviderRegistry } from '../providers/registry';
import { recordRateLimitDecision } from '../ratelimit/rate-limit-context';
import { type RateLimitDecision, type RateLimiter, requestsPerMinute } from '../ratelimit/rate-limiter';
import type { Clock } from '../shared/clock';

export interface GenerationAdmissionDeps {
  catalog: ReadonlyMap<string, CatalogModel>;
  providers: ProviderRegistry;
  rateLimiter: RateLimiter;
  clock: Clock;
  metrics: GatewayMetrics;
}

/** Whether a request may generate at all, before anything is reserved: its model, the key's permissions and RPM. */
export class GenerationAdmission {
  constructor(private readonly deps: GenerationAdmissionDeps) {}

  modelFor(model: string, providerOverride?: string): CatalogModel {
    const { catalog, providers } = this.deps;
    const entry = catalog.get(model);
    if (providerOverride !== undefined) {
      if (!providers.has(providerOverride)) {
        throw new ApiError('invalid_request', `Unknown provider ${providerOverride}. Known providers: ${[...providers.names()].join(', ')}.`, {
          param: 'provider',
        });
      }
      if (entry && entry.provider !== providerOverride) {
        throw new ApiError('invalid_request', `Model ${model} is served by ${entry.provider}, not ${providerOverride}.`, { param: 'provider' });
      }
      // Trusted callers may address an upstream model the catalog does not list.
      if (!entry) {
        return {
          model,
          provider: providerOverride,
          upstream_model: model,
          credits_per_image: 0,
          default_size: '1024x1024',
          ...transportFor(providerOverride, model),
          ...upstreamLimitsOf(model),
        };
      }
    }
    if (!entry) throw modelNotFound(model, catalog);
    return entry;
  }

  /**
   * The key's model and provider checks (and its project's), then its RPM, then its project's: the
   * same for every way a key submits work. The key's count is recorded in the request's context for
   * the response headers; a request over either limit is refused here, counted, with when to retry.
   */
  async admitForKey(key: ClientKey, model: string): Promise<CatalogModel> {
    const entry = this.modelFor(model);
    checkModelPermitted(key, entry);
    const now = this.deps.clock.now();
    const decision = await this.deps.rateLimiter.consume(key.id, key.rateLimitRpm, now);
    recordRateLimitDecision(decision);
    if (!decision.allowed) throw this.overLimit(decision);
    const project = key.project;
    if (project !== null && project.rateLimitRpm !== null) {
      // The limiter's windows are named by owner id; a project's (prj_) never meets a key's (key_).
      const projectDecision = await this.deps.rateLimiter.consume(project.id, project.rateLimitRpm, now);
      recordRateLimitDecision(projectDecision, 'project');
      if (!projectDecision.allowed) {
        this.deps.metrics.rateLimitRefusals.inc();
        throw projectRateLimited(project, projectDecision.resetSeconds);
      }
    }
    return entry;
  }

  private overLimit(decision: RateLimitDecision): ApiError {
    this.deps.metrics.rateLimitRefusals.inc();
    return new ApiError('rate_limited', `Rate limit of ${requestsPerMinute(decision.limit)} reached; retry in ${decision.resetSeconds} s.`, {
      headers: { 'Retry-After': String(decision.resetSeconds) },
    });
  }
}

/** The transport of a model outside the catalog, for a provider with several (formats.ts). */
function transportFor(provider: string, upstreamModel: string): { transport?: string } {
  const format = formatForUpstreamModel(provider, upstreamModel);
  return format ? { transport: format.format } : {};
}
