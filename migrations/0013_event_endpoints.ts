import { type Kysely, sql } from 'kysely';

// Receivers of pushed events as data: managed at runtime through /v1/endpoints (managed 'api'),
// or one per EVENT_WEBHOOK_URLS entry (managed 'config'). An endpoint's deliveries and its
// dispatch position are named by its key (event_deliveries.url_key, event_dispatch.url_key): a
// configured URL keeps the fingerprint it had before, so its existing deliveries stay its own.
// Frozen once landed: change the schema with a new file.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table event_endpoints (
      -- ep_ and 32 hex digits; a configured URL's is ep_ and its fingerprint.
      id text primary key,
      key text not null unique,
      managed text not null check (managed in ('api', 'config')),
      -- Where to POST, as given (it may carry userinfo or query secrets: used only to send). A
      -- configured endpoint stores only its redacted form: its instances read the URL from the environment.
      url text not null,
      shown_url text not null,
      description text not null default '',
      -- Event types it receives; null: every type.
      types text[],
      rate_limit_per_s integer check (rate_limit_per_s > 0),
      status text not null default 'active' check (status in ('active', 'paused', 'disabled')),
      disabled_reason text,
      -- Signing secrets (whsec_...), used only to sign; null for a configured endpoint (EVENT_WEBHOOK_SECRET signs).
      secret text,
      previous_secret text,
      previous_expires_at timestamptz,
      -- Since when every attempt has failed (null after a 2xx).
      failing_since timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )`.execute(db);
  await sql`alter table events drop constraint events_type_check`.execute(db);
  await sql`alter table events add constraint events_type_check check (type in
    ('underwriting.completed', 'underwriting.submit_failed', 'underwriting.expired', 'callback.unmatched', 'endpoint.disabled'))`.execute(db);
  await sql`alter table audit_log drop constraint audit_log_action_check`.execute(db);
  await sql`alter table audit_log add constraint audit_log_action_check check (action in
    ('lookup', 'export', 'erase', 'endpoint.create', 'endpoint.update', 'endpoint.delete', 'endpoint.rotate_secret', 'endpoint.replay'))`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`delete from audit_log where action like 'endpoint.%'`.execute(db);
  await sql`alter table audit_log drop constraint audit_log_action_check`.execute(db);
  await sql`alter table audit_log add constraint audit_log_action_check check (action in ('lookup', 'export', 'erase'))`.execute(db);
  await sql`delete from events where type = 'endpoint.disabled'`.execute(db);
  await sql`alter table events drop constraint events_type_check`.execute(db);
  await sql`alter table events add constraint events_type_check check (type in
    ('underwriting.completed', 'underwriting.submit_failed', 'underwriting.expired', 'callback.unmatched'))`.execute(db);
  await sql`drop table event_endpoints`.execute(db);
}
