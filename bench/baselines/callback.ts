import type { FastifyPluginAsync } from 'fastify';
import type pg from 'pg';

// The bench's first naive callback receiver (now served at /v1/callbacks/underwriting-legacy): keep the raw bytes, then insert-result + update-request in one
// transaction, statement by statement. No NOTIFY (the baseline has no long-polls to wake): a
// NOTIFY inside the transaction would hold PostgreSQL's database-wide notify lock through the
// commit's WAL flush and cap the baseline, flattering the gateway.

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

export function callbackBaseline(pool: pg.Pool, path: string): FastifyPluginAsync {
  return async (app) => {
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

    app.post(path, async (request, reply) => {
      const raw = request.body as Buffer;
      const result = JSON.parse(raw.toString('utf8')) as Result;
      const decided = decision(result.response);
      const client = await pool.connect();
      try {
        await client.query('begin');
        const inserted = await client.query<{ id: string }>(
          `insert into callbacks (peer, raw_body, outcome, customer_uuid, started, finished, body, decision)
           values ($1, $2, 'unmatched', $3, $4, $5, $6, $7)
           on conflict (customer_uuid, started, finished) do nothing returning id`,
          [request.ip, raw, result.customerUuid, result.started, result.finished, result, decided],
        );
        const callbackId = inserted.rows[0]?.id;
        if (callbackId !== undefined) {
          const matched = await client.query<{ id: string }>(
            `update underwriting_requests
             set status = 'completed', result_callback_id = $2, decision = $3, completed_at = now(), updated_at = now()
             where id = (select id from underwriting_requests where customer_uuid = $1 and result_callback_id is null
                         order by id desc limit 1 for update)
             returning id`,
            [result.customerUuid, callbackId, decided],
          );
          const requestId = matched.rows[0]?.id;
          if (requestId !== undefined) {
            await client.query(`update callbacks set outcome = 'matched', request_id = $2 where id = $1`, [callbackId, requestId]);
          }
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
