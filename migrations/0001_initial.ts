import { type Kysely, sql } from 'kysely';

// Migrations are frozen once landed: change the schema with a new file, never by editing this one.

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('underwriting_requests')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('customer_uuid', 'text', (c) => c.notNull())
    .addColumn('cpf_hash', 'text', (c) => c.notNull())
    .addColumn('cpf_masked', 'text', (c) => c.notNull())
    .addColumn('cost_saving_enabled', 'boolean', (c) => c.notNull())
    .addColumn('srd', 'jsonb')
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('submitting', 'submitted', 'submit_failed', 'expired', 'completed')`),
    )
    .addColumn('upstream_status', 'integer')
    .addColumn('upstream_error', 'text')
    .addColumn('idempotency_key', 'text')
    .addColumn('submitted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', 'timestamptz')
    .addColumn('result_callback_id', 'bigint', (c) => c.unique())
    .addColumn('decision', 'text', (c) => c.check(sql`decision in ('approved', 'declined', 'no_score', 'filtered')`))
    .execute();

  // One request awaiting its callback per customer, across every instance: the index is the lock.
  await sql`create unique index underwriting_requests_one_in_flight
    on underwriting_requests (customer_uuid) where status in ('submitting', 'submitted')`.execute(db);
  // One customer's requests, newest first; also the callback's "newest without a result".
  await sql`create index underwriting_requests_customer on underwriting_requests (customer_uuid, id desc)`.execute(db);
  // Keyset pagination of the list, with and without its filters, and the CPF lookup.
  await sql`create index underwriting_requests_list on underwriting_requests (submitted_at desc, id desc)`.execute(db);
  await sql`create index underwriting_requests_status_list
    on underwriting_requests (status, submitted_at desc, id desc)`.execute(db);
  await sql`create index underwriting_requests_decision_list
    on underwriting_requests (decision, submitted_at desc, id desc) where decision is not null`.execute(db);
  await sql`create index underwriting_requests_cpf_list
    on underwriting_requests (cpf_hash, submitted_at desc, id desc)`.execute(db);
  // The expiry sweep reads only what is still waiting.
  await sql`create index underwriting_requests_waiting
    on underwriting_requests (submitted_at) where status = 'submitted'`.execute(db);

  await db.schema
    .createTable('callbacks')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('received_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('peer', 'text')
    .addColumn('raw_body', 'bytea', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull().check(sql`outcome in ('matched', 'unmatched', 'invalid')`))
    .addColumn('error', 'text')
    .addColumn('customer_uuid', 'text')
    .addColumn('started', 'timestamptz')
    .addColumn('finished', 'timestamptz')
    .addColumn('body', 'jsonb')
    .addColumn('decision', 'text', (c) => c.check(sql`decision in ('approved', 'declined', 'no_score', 'filtered')`))
    .addColumn('request_id', 'bigint', (c) => c.references('underwriting_requests.id'))
    // A duplicate delivery of one result stores nothing new, however many arrive at once.
    .addUniqueConstraint('callbacks_dedup', ['customer_uuid', 'started', 'finished'])
    .execute();
  await sql`create index callbacks_unmatched on callbacks (customer_uuid, id) where outcome = 'unmatched'`.execute(db);
  await sql`create index callbacks_request on callbacks (request_id) where request_id is not null`.execute(db);

  await db.schema
    .alterTable('underwriting_requests')
    .addForeignKeyConstraint('underwriting_requests_result_fk', ['result_callback_id'], 'callbacks', ['id'])
    .execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('body_hash', 'text', (c) => c.notNull())
    .addColumn('request_id', 'bigint', (c) => c.references('underwriting_requests.id'))
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'jsonb')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await sql`create index idempotency_keys_expiry on idempotency_keys (expires_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute();
  await db.schema.alterTable('underwriting_requests').dropConstraint('underwriting_requests_result_fk').execute();
  await db.schema.dropTable('callbacks').execute();
  await db.schema.dropTable('underwriting_requests').execute();
}
