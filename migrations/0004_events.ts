import { type Kysely, sql } from 'kysely';

// Outcome events and their push deliveries. Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table events (
      id bigint generated always as identity primary key,
      public_id text not null unique,
      type text not null check (type in
        ('underwriting.completed', 'underwriting.submit_failed', 'underwriting.expired', 'callback.unmatched')),
      customer_uuid text not null,
      created_at timestamptz not null,
      -- The transaction that wrote the event: the feed pages by (tx_id, id) and never reads past
      -- the oldest transaction still running, so a row committed late can never be skipped.
      tx_id xid8 not null default pg_current_xact_id(),
      request_id bigint references underwriting_requests (id) on delete cascade,
      callback_id bigint references callbacks (id) on delete cascade,
      data jsonb not null
    )`.execute(db);
  await sql`create index events_feed on events (tx_id, id)`.execute(db);
  await sql`create index events_customer_feed on events (customer_uuid, tx_id, id)`.execute(db);
  await sql`create index events_request on events (request_id) where request_id is not null`.execute(db);
  await sql`create index events_callback on events (callback_id) where callback_id is not null`.execute(db);
  await sql`create index events_created on events (created_at)`.execute(db);

  await sql`
    create table event_deliveries (
      id bigint generated always as identity primary key,
      event_id bigint not null references events (id) on delete cascade,
      customer_uuid text not null,
      -- A fingerprint of the URL as configured; url is its redacted form (no userinfo, no query
      -- values), so that no secret a URL carries is ever stored.
      url_key text not null,
      url text not null,
      status text not null default 'pending' check (status in ('pending', 'delivered', 'dead')),
      attempts integer not null default 0,
      queued_at timestamptz not null,
      next_attempt_at timestamptz not null,
      lease_until timestamptz,
      lease_token text,
      last_attempt_at timestamptz,
      last_status integer,
      last_error text,
      delivered_at timestamptz,
      unique (event_id, url_key)
    )`.execute(db);
  // What a worker claims: due pending deliveries. And the order rule: a customer's earlier pending
  // delivery to the same URL holds back its later ones.
  await sql`create index event_deliveries_due on event_deliveries (next_attempt_at, id) where status = 'pending'`.execute(db);
  await sql`create index event_deliveries_order
    on event_deliveries (url_key, customer_uuid, event_id) where status = 'pending'`.execute(db);
  await sql`create index event_deliveries_dead on event_deliveries (event_id) where status = 'dead'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table event_deliveries`.execute(db);
  await sql`drop table events`.execute(db);
}
