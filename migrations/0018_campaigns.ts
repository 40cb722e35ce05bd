import { type Kysely, sql } from 'kysely';

// Issue 37: campaigns, a file of submits uploaded at once (src/campaigns). A campaign holds no
// personal data: counts, and the rejected lines by number with the reasons (never a line's
// content, which holds a CPF). Its requests are ordinary requests that name it in campaign_id.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('campaigns')
    .addColumn('id', 'bigint', (c) => c.primaryKey().generatedAlwaysAsIdentity())
    // cmp_ and 32 hex digits: the id the API shows (the bigint keeps the requests' index small).
    .addColumn('public_id', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    // Each batch of its upload touches it: an upload that stopped beating died with its instance.
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('running').check(sql`status in ('running', 'done', 'cancelled')`))
    .addColumn('source', 'text', (c) => c.notNull().check(sql`source in ('ndjson', 'csv')`))
    // A key's fingerprint (key:…) or the peer (peer:…) when the routes have no keys; never a key.
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('accepted', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('rejected', 'integer', (c) => c.notNull().defaultTo(0))
    // The first rejected lines: [{line, issues: [{path, message}]}], never a line's content.
    .addColumn('rejected_lines', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    // Set once the whole file was read; null while it is read, or when the upload was cut short.
    .addColumn('uploaded_at', 'timestamptz')
    .addColumn('upload_error', 'text')
    .addColumn('cancelled_at', 'timestamptz')
    .execute();
  // The list, newest first, by keyset.
  await sql`create index campaigns_list on campaigns (created_at desc, id desc)`.execute(db);

  await sql`alter table underwriting_requests add column campaign_id bigint references campaigns (id)`.execute(db);
  // A campaign's counts and rate (one grouped index-only scan) and its results in file order (keyset on id).
  // Partial: a request outside any campaign pays nothing for it.
  await sql`create index underwriting_requests_campaign
    on underwriting_requests (campaign_id, id) include (status, decision, submitted_at) where campaign_id is not null`.execute(db);
  // Whether a campaign still has work in flight: the list reads it per campaign, without its counts.
  await sql`create index underwriting_requests_campaign_open
    on underwriting_requests (campaign_id) where campaign_id is not null and status in ('queued', 'submitting', 'submitted')`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index underwriting_requests_campaign_open`.execute(db);
  await sql`drop index underwriting_requests_campaign`.execute(db);
  await sql`alter table underwriting_requests drop column campaign_id`.execute(db);
  await db.schema.dropTable('campaigns').execute();
}
