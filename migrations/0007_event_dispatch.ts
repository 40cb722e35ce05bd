import { type Kysely, sql } from 'kysely';

// Where each webhook target's deliveries have been written up to. The statement that records an
// event no longer writes its deliveries: the delivery worker writes them afterwards, in batches,
// from the event feed, past this position (so the callback statement carries no delivery write).
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table event_dispatch (
      -- The target's fingerprint, as event_deliveries.url_key; url is its redacted form.
      url_key text primary key,
      url text not null,
      -- Every event at or before (tx_id, event_id) in feed order has its delivery to this target
      -- written (or was recorded before the target was first configured).
      tx_id xid8 not null,
      event_id bigint not null,
      updated_at timestamptz not null
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table event_dispatch`.execute(db);
}
