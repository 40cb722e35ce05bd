import type { FastifyPluginAsync } from 'fastify';
import type pg from 'pg';

// The naive read of one customer: its requests with their results through the indexed
// (customer_uuid, id desc) scan, then its unmatched callbacks; no long-poll.

interface Row {
  customer_uuid: string;
  status: string;
  decision: string | null;
  cpf_masked: string;
  cost_saving_enabled: boolean;
  srd: unknown;
  submitted_at: Date;
  completed_at: Date | null;
  upstream_status: number | null;
  result: unknown;
}

function present(row: Row) {
  return {
    customerUuid: row.customer_uuid,
    status: row.status,
    decision: row.decision,
    cpfMasked: row.cpf_masked,
    costSavingEnabled: row.cost_saving_enabled,
    srd: row.srd,
    submittedAt: row.submitted_at.toISOString(),
    completedAt: row.completed_at?.toISOString() ?? null,
    upstreamStatus: row.upstream_status,
    result: row.result,
  };
}

export function getOneBaseline(pool: pg.Pool): FastifyPluginAsync {
  return async (app) => {
    app.get('/v1/underwritings/:customerUuid', async (request, reply) => {
      const { customerUuid } = request.params as { customerUuid: string };
      const requests = await pool.query<Row>(
        `select r.customer_uuid, r.status, r.decision, r.cpf_masked, r.cost_saving_enabled, r.srd, r.submitted_at,
                r.completed_at, r.upstream_status, c.body as result
         from underwriting_requests r left join callbacks c on c.id = r.result_callback_id
         where r.customer_uuid = $1 order by r.id desc limit 100`,
        [customerUuid],
      );
      const [newest, ...history] = requests.rows;
      if (newest === undefined) return reply.code(404).send({ error: 'not_found', message: 'no such customer' });
      const unmatched = await pool.query<{ body: unknown }>(
        `select body from callbacks where customer_uuid = $1 and outcome = 'unmatched' order by id`,
        [customerUuid],
      );
      return { ...present(newest), history: history.map(present), unmatched: unmatched.rows.map((r) => r.body) };
    });
  };
}
