import { type Kysely, sql } from 'kysely';

// Issue 34: the statistics read costs its buckets, not its rows (docs/operations.md, "Closed
// hours"). An hour whose requests no longer await the provider is closed by a periodic pass
// (src/aggregates/closing.ts): its live requests and stray callbacks are added to statistics_hourly
// and turnaround_hourly (the rows retention folds its purges into) and closed_at is set, in one
// transaction. The read takes a closed hour from those rows alone and reads live rows only for the
// hours not closed.
//
// A row of a closed hour is counted in its aggregates, so whatever still changes or deletes one
// adjusts them in the same transaction, by the triggers below: a late callback completing an
// expired or failed request (the only update a closed hour's request can still get), erasure, and
// retention's delete (which first folds its rows as it always did: +1 there, -1 here, counted once).
// They take the closing pass's lock shared (the pass takes it exclusively) and look at closed_at in
// a statement of their own after it, so a pass either closes the hour before they look, or waits
// for them and folds what they left.
//
// The lock's id is CLOSING_LOCK_ID in src/aggregates/sql.ts; the turnaround bin is
// turnaroundBin of src/aggregates/turnaround.ts, written out. Frozen once landed: change them with
// a new file.

const LOCK = '4127708853940019163';
const ORIGIN = `timestamptz '2000-01-01 00:00:00+00'`;
const BIN = (alias: string) =>
  `least(320, floor(8 * ln(greatest(date_part('epoch', ${alias}completed_at - ${alias}submitted_at) * 1000, 1)) / ln(2)))::smallint`;
const REQUEST_COUNTS = ['submitted', 'completed', 'expired', 'submit_failed', 'approved', 'declined', 'no_score', 'filtered'];

export async function up(db: Kysely<unknown>): Promise<void> {
  // Set when the hour's live rows were added to its counts; null: the read adds them itself.
  await sql`alter table statistics_hourly add column closed_at timestamptz`.execute(db);
  // The hours still open, for the closing pass: a few, however long the history.
  await sql`create index statistics_hourly_open on statistics_hourly (hour) where closed_at is null`.execute(db);

  // One request's counts added (sign 1) to or taken (-1) from its hour, when that hour is closed.
  await sql.raw(`
    create function statistics_closed_hour_add(p_submitted_at timestamptz, p_status text, p_decision text,
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
       where s.hour = p_hour and s.closed_at is not null;
      if found and p_status = 'completed' and p_completed_at is not null then
        insert into turnaround_hourly as t (hour, bin, requests)
        values (p_hour, ${BIN('p_')}, p_sign)
        on conflict (hour, bin) do update set requests = t.requests + excluded.requests;
      end if;
    end $$`).execute(db);

  // A request of a closed hour changed (a late callback): its old counts out, its new ones in.
  await sql.raw(`
    create function statistics_closed_request_changed() returns trigger language plpgsql as $$
    begin
      perform pg_advisory_xact_lock_shared(${LOCK});
      perform statistics_closed_hour_add(old.submitted_at, old.status, old.decision, old.completed_at, -1);
      perform statistics_closed_hour_add(new.submitted_at, new.status, new.decision, new.completed_at, 1);
      return null;
    end $$`).execute(db);
  // Requests awaiting the provider are never in a closed hour: only the others' changes can matter.
  await sql`
    create trigger statistics_closed_request_changed after update on underwriting_requests
    for each row when (old.status not in ('queued', 'submitting', 'submitted')
      and (old.status, old.decision, old.completed_at, old.submitted_at)
          is distinct from (new.status, new.decision, new.completed_at, new.submitted_at))
    execute function statistics_closed_request_changed()`.execute(db);

  // Deleted requests (erasure, retention) taken out of their closed hours, per statement.
  await sql.raw(`
    create function statistics_closed_requests_deleted() returns trigger language plpgsql as $$
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
  await sql`
    create trigger statistics_closed_requests_deleted after delete on underwriting_requests
    referencing old table as gone for each statement
    execute function statistics_closed_requests_deleted()`.execute(db);

  // Deleted unmatched and invalid callbacks taken out of their closed hours (of arrival), per statement.
  await sql.raw(`
    create function statistics_closed_callbacks_deleted() returns trigger language plpgsql as $$
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
  await sql`
    create trigger statistics_closed_callbacks_deleted after delete on callbacks
    referencing old table as gone for each statement
    execute function statistics_closed_callbacks_deleted()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  // Closed hours hold their live rows too: taken out again, so that the read before this file
  // (aggregates plus every live row) counts each row once.
  await sql.raw(`
    update statistics_hourly s
       set ${REQUEST_COUNTS.map((c) => `${c} = s.${c} - l.${c}`).join(', ')}
      from (select date_bin('1 hour', r.submitted_at, ${ORIGIN}) as hour, count(*) as submitted,
                   count(*) filter (where r.status = 'completed') as completed, count(*) filter (where r.status = 'expired') as expired,
                   count(*) filter (where r.status = 'submit_failed') as submit_failed,
                   count(*) filter (where r.decision = 'approved') as approved, count(*) filter (where r.decision = 'declined') as declined,
                   count(*) filter (where r.decision = 'no_score') as no_score, count(*) filter (where r.decision = 'filtered') as filtered
              from underwriting_requests r group by 1) l
     where s.hour = l.hour and s.closed_at is not null`).execute(db);
  await sql.raw(`
    update statistics_hourly s
       set unmatched = s.unmatched - l.unmatched, invalid = s.invalid - l.invalid
      from (select date_bin('1 hour', c.received_at, ${ORIGIN}) as hour,
                   count(*) filter (where c.outcome = 'unmatched') as unmatched, count(*) filter (where c.outcome = 'invalid') as invalid
              from callbacks c where c.outcome in ('unmatched', 'invalid') group by 1) l
     where s.hour = l.hour and s.closed_at is not null`).execute(db);
  await sql.raw(`
    update turnaround_hourly t
       set requests = t.requests - l.requests
      from (select date_bin('1 hour', r.submitted_at, ${ORIGIN}) as hour, ${BIN('r.')} as bin, count(*) as requests
              from underwriting_requests r where r.status = 'completed' and r.completed_at is not null group by 1, 2) l
     where t.hour = l.hour and t.bin = l.bin
       and exists (select 1 from statistics_hourly s where s.hour = t.hour and s.closed_at is not null)`).execute(db);
  await sql`delete from turnaround_hourly where requests = 0`.execute(db);
  await sql`drop trigger statistics_closed_callbacks_deleted on callbacks`.execute(db);
  await sql`drop trigger statistics_closed_requests_deleted on underwriting_requests`.execute(db);
  await sql`drop trigger statistics_closed_request_changed on underwriting_requests`.execute(db);
  await sql`drop function statistics_closed_callbacks_deleted()`.execute(db);
  await sql`drop function statistics_closed_requests_deleted()`.execute(db);
  await sql`drop function statistics_closed_request_changed()`.execute(db);
  await sql`drop function statistics_closed_hour_add(timestamptz, text, text, timestamptz, integer)`.execute(db);
  await sql`drop index statistics_hourly_open`.execute(db);
  await sql`alter table statistics_hourly drop column closed_at`.execute(db);
}
