import type { FastifyReply } from 'fastify';

/**
 * Aborted when the client closes its connection before its answer is sent: a long-poll it gave up
 * on stops waiting, and frees its place among the bounded waiters, instead of holding it for nobody
 * until its deadline.
 */
export function abandonedBy(reply: FastifyReply): AbortSignal {
  const gone = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.abort();
  });
  return gone.signal;
}
