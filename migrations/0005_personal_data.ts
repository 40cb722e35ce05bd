import { type Kysely, sql } from 'kysely';

// Migrations are frozen once landed: change the schema with a new file, never by editing this one.

export async function up(db: Kysely<unknown>): Promise<void> {
  // Who looked at or erased whose data. Holds no personal data: `subject` is a keyed hash and
  // `actor` a key's fingerprint or a peer address. Erasure never touches it.
  await db.schema
    .createTable('audit_log')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('action', 'text', (c) => c.notNull().check(sql`action in ('lookup', 'export', 'erase')`))
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('counts', 'jsonb', (c) => c.notNull())
    .execute();
  // GET /v1/audit: newest first, by keyset, with and without the action filter.
  await sql`create index audit_log_at on audit_log (at desc, id desc)`.execute(db);
  await sql`create index audit_log_action_at on audit_log (action, at desc, id desc)`.execute(db);

  // Erasure deletes a subject's idempotency keys by request (and the request's delete checks the
  // foreign key), which would otherwise scan the whole table once per request.
  await sql`create index idempotency_keys_request on idempotency_keys (request_id) where request_id is not null`.execute(db);
  // Erasure searches the raw bytes of invalid callbacks that name no customer; only those few are read.
  await sql`create index callbacks_invalid_anonymous on callbacks (id) where outcome = 'invalid' and customer_uuid is null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index callbacks_invalid_anonymous`.execute(db);
  await sql`drop index idempotency_keys_request`.execute(db);
  await db.schema.dropTable('audit_log').execute();
}
