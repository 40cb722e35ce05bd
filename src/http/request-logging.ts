import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/** Routes a platform polls every few seconds: their request lines are debug, not info. */
export const PROBE_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

const isProbe = (request: FastifyRequest) => PROBE_ROUTES.has(request.routeOptions.url ?? '');

/**
 * Fastify's request lines ("incoming request", "request completed"), with the probes' at debug:
 * a probe every few seconds from each of several checkers would otherwise be most of the log.
 * A probe that errors is still logged as an error.
 */
export class QuietProbesLogController extends LogController {
  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    if (!isProbe(request)) return super.incomingRequest(request, reply);
    if (!this.isLogDisabled(request)) request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error || !isProbe(request)) return super.requestCompleted(error, request, reply);
    if (!this.isLogDisabled(request)) reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
