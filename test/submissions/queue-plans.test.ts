import { CompiledQuery, sql } from 'kysely';
import t from 'tap';
import { ANY_QUEUED, CLAIM_NEXT } from '../../src/submissions/queue.js';
import { freshDatabase } from '../helpers/database.js';
import { plan } from '../helpers/plan.js';

// The forwarder's statements run once per forward (and the idle check twice a second per instance):
// each reads the queue's own index, whatever the size of the table or its statistics.
t.test('the queue is read through its index, with and without statistics', async (t) => {
  const { db } = await freshDatabase(t);
  await sql`
    insert into underwriting_requests (customer_uuid, cpf_hash, cpf_masked, cost_saving_enabled, status, queued_at)
    select 'cust-' || g, 'h', 'm', false, case when g > 19900 then 'queued' else 'completed' end,
           case when g > 19900 then now() end
      from generate_series(1, 20000) as g`.execute(db);
  for (const state of ['never analysed', 'analysed']) {
    if (state === 'analysed') await sql`analyze underwriting_requests`.execute(db);
    for (const [name, statement] of [
      ['claim the oldest queued', CLAIM_NEXT],
      ['is anything queued', ANY_QUEUED],
    ] as const) {
      const text = await plan(db, CompiledQuery.raw(statement.text, statement === CLAIM_NEXT ? [new Date().toISOString()] : []));
      t.notMatch(text, /Seq Scan on underwriting_requests/, `${name} (${state}): no sequential scan\n${text}`);
      t.match(text, /underwriting_requests_queue/, `${name} (${state}): the queue's index`);
    }
  }
});
