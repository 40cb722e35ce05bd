import { type Kysely, sql } from 'kysely';

// Issue 34: an open hour's statistics cost its buckets too, not all its rows (docs/performance.md,
// "Open hours"). An hour stays open until none of its requests awaits the provider, about the
// callback timeout after its end, and the read used to read all its live rows until then. Now the
// closing pass (src/aggregates/closing.ts) also folds each open hour's requests submitted before a
// watermark, `folded_until` (10 minutes before now at the latest, and never past a request queued
// in the hour, see below), into its counts, once. The read takes the hour's counts, reads its rows
// from the watermark on, and reads by id those below it that were still awaiting the provider when
// it was folded: they are listed in statistics_unfolded (with the hour they were folded in) and
// folded by a later pass once answered, expired or failed. Its unmatched and invalid callbacks
// (which never change) are folded up to a watermark of their own, stray_folded_until (10 minutes
// before now at the latest): a provider that signs with the wrong secret sends only those.
//
// A request is counted in its hour's row when the hour is closed, or when it was submitted before
// the hour's watermark and is not listed. Whatever changes or deletes a counted request adjusts the
// counts (migration 0022's triggers, given the second case here), under the same lock protocol.
//
// Queued requests are not listed (a campaign queues a million at once): a watermark never passes
// the first request still queued in its hour, nor the queued_at of a request being sent that was
// queued in it (a send the provider certainly did not receive puts it back there, submitted_at =
// queued_at, src/submissions/queue.ts). Frozen once landed: change them with a new file.

const LOCK = '4127708853940019163';
const ORIGIN = `timestamptz '2000-01-01 00:00:00+00'`;
const BIN = (alias: string) =>
  `least(320, floor(8 * ln(greatest(date_part('epoch', ${alias}completed_at - ${alias}submitted_at) * 1000, 1)) / ln(2)))::smallint`;
const REQUEST_COUNTS = ['submitted', 'completed', 'expired', 'submit_failed', 'approved', 'declined', 'no_score', 'filtered'];

/** A deleted request (of `gone`, aliased g) is in its hour's counts: the hour is closed, or g is below its watermark and not listed. */
const COUNTED = `(c.closed_at is not null or (g.submitted_at < c.folded_until
                 and not exists (select 1 from statistics_unfolded u where u.request_id = g.id)))`;

export async function up(db: Kysely<unknown>): Promise<void> {
  // Requests submitted in the hour before this are in its counts, but for those listed below; null: none.
  await sql`alter table statistics_hourly add column folded_until timestamptz`.execute(db);
  // Unmatched and invalid callbacks that arrived in the hour before this are in its counts; null: none.
  await sql`alter table statistics_hourly add column stray_folded_until timestamptz`.execute(db);
  // Requests below their hour's watermark that awaited the provider when it passed them.
  await sql`
    create table statistics_unfolded (
      request_id bigint primary key,
      hour timestamptz not null
    )`.execute(db);
  await sql`create index statistics_unfolded_hour on statistics_unfolded (hour)`.execute(db);

  // One request's counts added (sign 1) to or taken (-1) from its hour, when it is counted there.
  await sql.raw(`
    create function statistics_counted_add(p_id bigint, p_submitted_at timestamptz, p_status text, p_decision text,
                                           p_completed_at timestamptz, p_sign integer) returns void
    language plpgsql as $$
    declare
      p_hour timestamptz := date_bin('1 hour', p_submitted_at, ${ORIGIN});
    begin
      update statistics_hourly s
         set submitted = s.submitted + p_sign,
             completed = s.completed + p_sign * (p_status = 'completed')::int,
             expired = s.expired + p_sign * (p_status = 'expired')::int,
             submit_failed = s.submit_failed + p_sign * (p_status = 'submit_failed')::int,
             approved = s.approved + p_sign * (p_decision is not distinct from 'approved')::int,
             declined = s.declined + p_sign * (p_decision is not distinct from 'declined')::int,
             no_score = s.no_score + p_sign * (p_decision is not distinct from 'no_score')::int,
             filtered = s.filtered + p_sign * (p_decision is not distinct from 'filtered')::int
       where s.hour = p_hour
         and (s.closed_at is not null
              or (p_submitted_at < s.folded_until and not exists (select 1 from statistics_unfolded u where u.request_id = p_id)));
      if found and p_status = 'completed' and p_completed_at is not null then
        insert into turnaround_hourly as t (hour, bin, requests)
        values (p_hour, ${BIN('p_')}, p_sign)
        on conflict (hour, bin) do update set requests = t.requests + excluded.requests;
      end if;
    end $$`).execute(db);

  await sql.raw(`
    create or replace function statistics_closed_request_changed() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      perform statistics_counted_add(old.id, old.submitted_at, old.status, old.decision, old.completed_at, -1);
      perform statistics_counted_add(new.id, new.submitted_at, new.status, new.decision, new.completed_at, 1);
      return null;
    end $$`).execute(db);

  // Deleted requests taken out of the hours that count them, and out of the list.
  await sql.raw(`
    create or replace function statistics_closed_requests_deleted() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      insert into statistics_hourly as s (hour, ${REQUEST_COUNTS.join(', ')})
      select x.hour, -count(*),
             -count(*) filter (where x.status = 'completed'), -count(*) filter (where x.status = 'expired'),
             -count(*) filter (where x.status = 'submit_failed'),
             -count(*) filter (where x.decision = 'approved'), -count(*) filter (where x.decision = 'declined'),
             -count(*) filter (where x.decision = 'no_score'), -count(*) filter (where x.decision = 'filtered')
        from (select c.hour, g.status, g.decision
                from gone g join statistics_hourly c on c.hour = date_bin('1 hour', g.submitted_at, ${ORIGIN})
               where ${COUNTED}) x
       group by x.hour
       order by x.hour
      on conflict (hour) do update set
        ${REQUEST_COUNTS.map((c) => `${c} = s.${c} + excluded.${c}`).join(', ')};
      insert into turnaround_hourly as t (hour, bin, requests)
      select x.hour, x.bin, -count(*)
        from (select c.hour, ${BIN('g.')} as bin
                from gone g join statistics_hourly c on c.hour = date_bin('1 hour', g.submitted_at, ${ORIGIN})
               where g.status = 'completed' and g.completed_at is not null and ${COUNTED}) x
       group by x.hour, x.bin
       order by x.hour, x.bin
      on conflict (hour, bin) do update set requests = t.requests + excluded.requests;
      delete from statistics_unfolded u using gone g where u.request_id = g.id;
      return null;
    end $$`).execute(db);

  // Deleted unmatched and invalid callbacks taken out of the hours that count them (of arrival).
  await sql.raw(`
    create or replace function statistics_closed_callbacks_deleted() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      insert into statistics_hourly as s (hour, unmatched, invalid)
      select c.hour, -count(*) filter (where g.outcome = 'unmatched'), -count(*) filter (where g.outcome = 'invalid')
        from gone g join statistics_hourly c on c.hour = date_bin('1 hour', g.received_at, ${ORIGIN})
       where g.outcome in ('unmatched', 'invalid') and (c.closed_at is not null or g.received_at < c.stray_folded_until)
       group by c.hour
       order by c.hour
      on conflict (hour) do update set unmatched = s.unmatched + excluded.unmatched, invalid = s.invalid + excluded.invalid;
      return null;
    end $$`).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  // The folded requests of open hours taken out of their counts again: migration 0022's read adds
  // every live row of an open hour itself.
  const folded = `
      from underwriting_requests r
      join statistics_hourly s on s.hour = date_bin('1 hour', r.submitted_at, ${ORIGIN})
     where s.closed_at is null and r.submitted_at < s.folded_until
       and not exists (select 1 from statistics_unfolded u where u.request_id = r.id)`;
  await sql.raw(`
    update statistics_hourly s
       set ${REQUEST_COUNTS.map((c) => `${c} = s.${c} - l.${c}`).join(', ')}
      from (select s.hour, count(*) as submitted,
                   count(*) filter (where r.status = 'completed') as completed, count(*) filter (where r.status = 'expired') as expired,
                   count(*) filter (where r.status = 'submit_failed') as submit_failed,
                   count(*) filter (where r.decision = 'approved') as approved, count(*) filter (where r.decision = 'declined') as declined,
                   count(*) filter (where r.decision = 'no_score') as no_score, count(*) filter (where r.decision = 'filtered') as filtered
              ${folded}
             group by s.hour) l
     where s.hour = l.hour`).execute(db);
  await sql.raw(`
    update turnaround_hourly t
       set requests = t.requests - l.requests
      from (select s.hour, ${BIN('r.')} as bin, count(*) as requests
              ${folded} and r.status = 'completed' and r.completed_at is not null
             group by 1, 2) l
     where t.hour = l.hour and t.bin = l.bin`).execute(db);
  await sql`delete from turnaround_hourly where requests = 0`.execute(db);
  await sql.raw(`
    update statistics_hourly s
       set unmatched = s.unmatched - l.unmatched, invalid = s.invalid - l.invalid
      from (select s.hour, count(*) filter (where c.outcome = 'unmatched') as unmatched, count(*) filter (where c.outcome = 'invalid') as invalid
              from callbacks c
              join statistics_hourly s on s.hour = date_bin('1 hour', c.received_at, ${ORIGIN})
             where c.outcome in ('unmatched', 'invalid') and s.closed_at is null and c.received_at < s.stray_folded_until
             group by s.hour) l
     where s.hour = l.hour`).execute(db);
  // Migration 0022's trigger functions as they were.
  await sql.raw(`
    create or replace function statistics_closed_request_changed() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      perform statistics_closed_hour_add(old.submitted_at, old.status, old.decision, old.completed_at, -1);
      perform statistics_closed_hour_add(new.submitted_at, new.status, new.decision, new.completed_at, 1);
      return null;
    end $$`).execute(db);
  await sql.raw(`
    create or replace function statistics_closed_requests_deleted() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      insert into statistics_hourly as s (hour, ${REQUEST_COUNTS.join(', ')})
      select x.hour, -count(*),
             -count(*) filter (where x.status = 'completed'), -count(*) filter (where x.status = 'expired'),
             -count(*) filter (where x.status = 'submit_failed'),
             -count(*) filter (where x.decision = 'approved'), -count(*) filter (where x.decision = 'declined'),
             -count(*) filter (where x.decision = 'no_score'), -count(*) filter (where x.decision = 'filtered')
        from (select date_bin('1 hour', g.submitted_at, ${ORIGIN}) as hour, g.status, g.decision from gone g) x
       where exists (select 1 from statistics_hourly c where c.hour = x.hour and c.closed_at is not null)
       group by x.hour
       order by x.hour
      on conflict (hour) do update set
        ${REQUEST_COUNTS.map((c) => `${c} = s.${c} + excluded.${c}`).join(', ')};
      insert into turnaround_hourly as t (hour, bin, requests)
      select x.hour, x.bin, -count(*)
        from (select date_bin('1 hour', g.submitted_at, ${ORIGIN}) as hour, ${BIN('g.')} as bin
                from gone g where g.status = 'completed' and g.completed_at is not null) x
       where exists (select 1 from statistics_hourly c where c.hour = x.hour and c.closed_at is not null)
       group by x.hour, x.bin
       order by x.hour, x.bin
      on conflict (hour, bin) do update set requests = t.requests + excluded.requests;
      return null;
    end $$`).execute(db);
  await sql.raw(`
    create or replace function statistics_closed_callbacks_deleted() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      insert into statistics_hourly as s (hour, unmatched, invalid)
      select x.hour, -count(*) filter (where x.outcome = 'unmatched'), -count(*) filter (where x.outcome = 'invalid')
        from (select date_bin('1 hour', g.received_at, ${ORIGIN}) as hour, g.outcome
                from gone g where g.outcome in ('unmatched', 'invalid')) x
       where exists (select 1 from statistics_hourly c where c.hour = x.hour and c.closed_at is not null)
       group by x.hour
       order by x.hour
      on conflict (hour) do update set unmatched = s.unmatched + excluded.unmatched, invalid = s.invalid + excluded.invalid;
      return null;
    end $$`).execute(db);
  await sql`drop function statistics_counted_add(bigint, timestamptz, text, text, timestamptz, integer)`.execute(db);
  await sql`drop table statistics_unfolded`.execute(db);
  await sql`alter table statistics_hourly drop column stray_folded_until`.execute(db);
  await sql`alter table statistics_hourly drop column folded_until`.execute(db);
}
