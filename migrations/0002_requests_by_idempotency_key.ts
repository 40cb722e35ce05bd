import { type Kysely, sql } from 'kysely';

// A retry that takes over an Idempotency-Key abandoned mid-way looks for the request its first
// attempt stored, so the provider is never called twice for one key.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index underwriting_requests_idempotency_key
    on underwriting_requests (idempotency_key, id desc) where idempotency_key is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index underwriting_requests_idempotency_key`.execute(db);
}
