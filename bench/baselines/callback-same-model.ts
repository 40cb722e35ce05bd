import type { FastifyPluginAsync } from 'fastify';
import type pg from 'pg';

// The naive callback receiver on the gateway's own data model, as the independent harness of
// issue 16 wrote it: raw body kept, the dedup unique key, every index the migrations create (it
// runs on the same migrated database), and per callback: begin, insert the result (matched to
// the customer's newest request without a result, locked), update that request, commit. Plain
// unnamed statements, one commit (one WAL flush) per callback, no batching, no NOTIFY.

interface Result {
  customerUuid: string;
  started: string;
  finished: string;
  response: { costSavingEnabled: boolean; score: number; limit: number };
}

function decision(r: Result['response']): string {
  if (r.score === -1) return r.costSavingEnabled ? 'filtered' : 'no_score';
  if (r.limit < 0) return 'no_score';
  return r.limit > 0 ? 'approved' : 'declined';
}

export function callbackSameModelBaseline(pool: pg.Pool, path: string): FastifyPluginAsync {
  return async (app) => {
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

    app.post(path, async (request, reply) => {
      const raw = request.body as Buffer;
      const result = JSON.parse(raw.toString('utf8')) as Result;
      const decided = decision(result.response);
      const client = await pool.connect();
      try {
        await client.query('begin');
        const inserted = await client.query<{ id: string; request_id: string | null }>(
          `insert into callbacks (peer, raw_body, outcome, customer_uuid, started, finished, body, decision, request_id)
           select $1, $2, case when r.id is null then 'unmatched' else 'matched' end, $3, $4, $5, $6, $7, r.id
           from (select 1) one
           left join lateral (
             select id from underwriting_requests where customer_uuid = $3 and result_callback_id is null
             order by id desc limit 1 for update
           ) r on true
           on conflict (customer_uuid, started, finished) do nothing
           returning id, request_id`,
          [request.ip, raw, result.customerUuid, result.started, result.finished, result, decided],
        );
        const row = inserted.rows[0];
        if (row?.request_id != null) {
          await client.query(
            `update underwriting_requests
             set status = 'completed', result_callback_id = $2, decision = $3, completed_at = now(), updated_at = now()
             where id = $1`,
            [row.request_id, row.id, decided],
          );
        }
        await client.query('commit');
      } catch (err) {
        await client.query('rollback').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
      return reply.code(200).send({ received: true });
    });
  };
}
