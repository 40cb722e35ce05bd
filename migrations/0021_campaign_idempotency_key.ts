import { type Kysely, sql } from 'kysely';

// Issue 37: POST /v1/campaigns takes an Idempotency-Key (docs/campaigns.md). The key names one
// campaign for 24 h: a retry with the same key and the same file is answered with that campaign
// again; with another file, 422. body_digest: SHA-256 of the file's bytes, set once the upload has
// read it whole. Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table campaigns add column idempotency_key text, add column body_digest text`.execute(db);
  // One campaign per key; a key is taken by inserting the campaign (atomic across instances).
  await sql`create unique index campaigns_idempotency_key on campaigns (idempotency_key) where idempotency_key is not null`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index campaigns_idempotency_key`.execute(db);
  await sql`alter table campaigns drop column body_digest, drop column idempotency_key`.execute(db);
}
