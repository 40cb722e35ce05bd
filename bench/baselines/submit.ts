import { createHmac } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import type pg from 'pg';
import { Agent, request as httpRequest } from 'undici';

// The naive submit proxy: Fastify's own JSON-schema validation, insert one row, forward with
// undici to the provider, record the provider's status.

interface Submit {
  customerUuid: string;
  cpf: string;
  costSavingEnabled: boolean;
  srd?: Record<string, unknown>;
}

const bodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['customerUuid', 'cpf', 'costSavingEnabled'],
  properties: {
    customerUuid: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,128}$' },
    cpf: { type: 'string', pattern: '^[0-9]{11}$' },
    costSavingEnabled: { type: 'boolean' },
    srd: { type: 'object' },
  },
} as const;

export interface SubmitBaselineOptions {
  pool: pg.Pool;
  providerBaseUrl: string;
  partnerToken: string;
  cpfHashKey: string;
}

export function submitBaseline(options: SubmitBaselineOptions): FastifyPluginAsync {
  const { pool, partnerToken, cpfHashKey } = options;
  const upstreamUrl = `${options.providerBaseUrl}/api/partner/credit/cards/underwritings`;
  const agent = new Agent({ keepAliveTimeout: 60_000 });

  return async (app) => {
    app.post('/v1/underwritings', { schema: { body: bodySchema } }, async (request, reply) => {
      const body = request.body as Submit;
      const cpfHash = createHmac('sha256', cpfHashKey).update(body.cpf).digest('hex');
      const cpfMasked = `***.${body.cpf.slice(3, 6)}.${body.cpf.slice(6, 9)}-**`;
      let id: string;
      let submittedAt: Date;
      try {
        const inserted = await pool.query<{ id: string; submitted_at: Date }>(
          `insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, srd, status)
           values ($1, $2, $3, $4, $5, 'submitting') returning id, submitted_at`,
          [body.customerUuid, cpfHash, cpfMasked, body.costSavingEnabled, body.srd ?? null],
        );
        id = inserted.rows[0]!.id;
        submittedAt = inserted.rows[0]!.submitted_at;
      } catch (err) {
        if ((err as { code?: string }).code === '23505') return reply.code(409).send({ error: 'in_flight', message: 'in flight' });
        throw err;
      }
      const upstream = await httpRequest(upstreamUrl, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', 'x-partner-auth': partnerToken },
        body: JSON.stringify(body),
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      await upstream.body.dump();
      const ok = upstream.statusCode >= 200 && upstream.statusCode < 300;
      await pool.query(
        `update underwriting_requests set status = $2, upstream_status = $3, updated_at = now() where id = $1`,
        [id, ok ? 'submitted' : 'submit_failed', upstream.statusCode],
      );
      if (!ok) return reply.code(502).send({ error: 'upstream_rejected', message: 'rejected', upstreamStatus: upstream.statusCode });
      return reply.code(202).send({
        customerUuid: body.customerUuid,
        status: 'submitted',
        submittedAt: submittedAt.toISOString(),
        upstreamStatus: upstream.statusCode,
      });
    });
  };
}
