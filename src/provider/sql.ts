import type { Kysely } from 'kysely';
import { runStatement } from '../db/run-statement.js';
import { defineStatement, NOT_WAITED_TO_DISK, type Statement } from '../db/statements.js';
import type { Tables } from '../db/types.js';

// The provider's pace as rows every instance shares (migration 0017): one statement takes a call
// slot, one gives it back. Time is the database's (clock_timestamp()), so instances whose clocks
// differ still count the same seconds.
//
// Both commit without waiting for their WAL flush (synchronous_commit off, as the NOTIFYs do): every
// instance's every call serialises on the one provider_pacing row, and a commit that waits for the
// disk holds that row's lock through the flush (docs/provider-pacing.md, "What a forward costs").
// What a database crash can take is a slot taken or given back in its last moments: a call it
// counted may be counted again, or its lease run out by itself (UPSTREAM_TIMEOUT_MS + 10 s); the
// request's own state (the claim, its outcome) is committed durably, after the take, and a flush
// writes everything committed before it.

/**
 * Within a second, call n (0-based) may start only once n * SPREAD_MS / maxRps milliseconds of it
 * have passed: the second's calls are spread over its first SPREAD_MS; one started later, in the
 * second's tail (TAIL_MS), counts in the next second too. A call is sent only while its window (its
 * second, or for a tail call the next one as well) has SEND_MARGIN_MS (pacing.ts) left, else it
 * takes another slot. So a call reaches the provider within a second it was counted in unless it
 * spends more than that margin on the way (the provider counts by its own clock;
 * docs/provider-pacing.md).
 */
export const SPREAD_MS = 700;

/**
 * The rest of a second, its tail: a call started then may reach the provider in the next second,
 * so it counts in both (provider_pacing.used_prev, migration 0023), and the tail's calls are
 * spread over it (call n at n * TAIL_MS / limit ms into it: denser than the head's, as the second
 * has that much less time left).
 */
export const TAIL_MS = 1000 - SPREAD_MS;

/** Why no slot was given, and what may end it. */
export type Refusal =
  /** The provider's Retry-After (or a backoff after a failure) holds every instance until untilMs. */
  | 'held'
  /** The circuit is open until untilMs, or another instance's probe is running. */
  | 'open'
  /** This second's calls are all taken, or the next is not due yet (spread): untilMs. */
  | 'rate'
  /** PROVIDER_MAX_IN_FLIGHT calls are in flight. */
  | 'in_flight';

export type TakeResult =
  | {
      /** One or more slots (as many as were wanted and the pace allows now, one while the circuit probes), lowest first. */
      slots: number[];
      probe: boolean;
      /** Database time (ms since the epoch) when they were taken, and when their window ends (their second; for a tail call the next one). */
      nowMs: number;
      windowEndMs: number;
    }
  | { slots: null; refusal: Refusal; /** Database time (ms since the epoch) until which the refusal holds, when known. */ untilMs: number | null; nowMs: number };

export interface PaceLimits {
  maxRps: number;
  maxInFlight: number;
  circuitFailures: number;
}

export const TAKE = defineStatement('provider_take_slot', `
    with ${NOT_WAITED_TO_DISK},
    p as (select * from provider_pacing where id = 1 for update),
    -- The clock is read once the row is ours (a statement may wait for it), and never counts a
    -- second older than the one already counted.
    t as (select p.*, clock_timestamp() as now from p),
    c as (
      select t.*, floor(extract(epoch from t.now))::bigint as f,
             (extract(epoch from t.now) - floor(extract(epoch from t.now))) * 1000 as frac
      from t
    ),
    -- The second a call counts in (sec; window_s when the clock stepped back past it), how far into
    -- it we are (ms), and whether we are in its tail. Once a tail call started in second f, the row
    -- counts second f + 1 (window_s, used: the calls that may land there) and keeps f's own count in
    -- used_prev (migration 0023): an instance of the version before, which knows window_s and used
    -- alone, then sees f + 1's calls as they are, and refuses to start any in f's tail.
    u as (
      select c.*,
             case when c.window_s > c.f + 1 then c.window_s else c.f end as sec,
             case when c.window_s > c.f + 1 then 0 else c.frac end as ms,
             c.window_s = c.f + 1 or (c.window_s <= c.f and c.frac >= ${SPREAD_MS}) as tail,
             case when c.window_s = c.f + 1 then c.used_prev when c.window_s >= c.f then c.used else 0 end as used_now,
             case when c.window_s = c.f + 1 then c.used else 0 end as next_now
      from c
    ),
    v as (
      select u.now, u.f, u.sec, u.ms, u.tail, u.used_now, u.next_now, u.hold_until, u.open_until, u.probe_until,
             u.failures >= $3 as is_open,
             -- How many calls may start now: what this second has left (a tail call counts in the next
             -- one too, which holds only tail calls so far), what the spread has let through by now
             -- (call n of the first SPREAD_MS at n * SPREAD_MS / limit ms, call n of the tail at
             -- n * TAIL_MS / limit ms into it), and one while the circuit probes.
             case when u.failures >= $3 then 1
                  when u.tail then least($6::int, $1 - u.used_now, floor((u.ms - ${SPREAD_MS}) * $1 / ${TAIL_MS}.0)::int + 1 - u.next_now)
                  else least($6::int, $1 - u.used_now, floor(u.ms * $1 / ${SPREAD_MS}.0)::int + 1 - u.used_now)
             end as allowed,
             case
               when u.hold_until > u.now then 'held'
               when u.failures >= $3 and (coalesce(u.open_until > u.now, false) or coalesce(u.probe_until > u.now, false)) then 'open'
               when u.used_now >= $1 then 'rate'
               when not u.tail and u.ms < u.used_now * ${SPREAD_MS}.0 / $1 then 'rate'
               when u.tail and u.ms - ${SPREAD_MS} < u.next_now * ${TAIL_MS}.0 / $1 then 'rate'
               else 'ok'
             end as verdict
      from u
    ),
    free as (
      select s.slot from provider_slots s, v
      where s.slot < $2 and s.lease_until <= v.now and v.verdict = 'ok'
      order by s.slot
      limit (select greatest(allowed, 1) from v)
      for update of s skip locked
    ),
    taken as (
      update provider_slots s
         set lease_until = v.now + make_interval(secs => $5::double precision / 1000), holder = $4
        from v
       -- By primary key, whatever the limit: a join with free was planned as a scan of every slot
       -- row (10,000 at PROVIDER_MAX_IN_FLIGHT=10000: 0.65 ms a take).
       where s.slot = any (array(select slot from free)) and s.lease_until <= v.now
      returning s.slot
    ),
    paced as (
      update provider_pacing p
         set window_s = case when v.tail then v.f + 1 else v.sec end,
             used = case when v.tail then v.next_now else v.used_now end + (select count(*) from taken),
             used_prev = case when v.tail then v.used_now + (select count(*) from taken) else p.used_prev end,
             probe_until = case when v.is_open then v.now + make_interval(secs => $5::double precision / 1000) else p.probe_until end
        from v
       where p.id = 1 and exists (select 1 from taken)
      returning p.id
    )
    -- A call of the tail may reach the provider in the next second: its window ends with that one.
    select array(select slot from taken order by slot) as slots,
           ((case when v.tail then v.f + 2 else v.sec + 1 end) * 1000)::float8 as window_end_ms,
           case when v.verdict = 'ok' and not exists (select 1 from taken) then 'in_flight' else v.verdict end as verdict,
           v.is_open,
           (extract(epoch from v.now) * 1000)::float8 as now_ms,
           (case
              when v.verdict = 'held' then extract(epoch from v.hold_until) * 1000
              -- Open: until its period ends; while another instance's probe runs, unknown (asked again soon).
              when v.verdict = 'open' and coalesce(v.open_until > v.now, false) then extract(epoch from v.open_until) * 1000
              when v.verdict = 'rate' and v.used_now >= $1 then (v.sec + 1) * 1000
              when v.verdict = 'rate' and v.tail then v.sec * 1000 + ${SPREAD_MS} + v.next_now * ${TAIL_MS}.0 / $1
              when v.verdict = 'rate' then v.sec * 1000 + v.used_now * ${SPREAD_MS}.0 / $1
            end)::float8 as until_ms
    from v, not_waited`);

/**
 * Takes up to `want` call slots (the callers waiting) if the pace, the provider's hold and the
 * circuit allow them now; one statement, so that callers waiting together cost one round trip,
 * not one each in turn (a synchronous submit's pace was one round trip at a time per instance:
 * docs/provider-pacing.md).
 */
export async function takeSlots(db: Kysely<Tables>, limits: PaceLimits, holder: string, leaseMs: number, want = 1): Promise<TakeResult> {
  const [row] = await runStatement<{ slots: number[]; window_end_ms: number; verdict: string; is_open: boolean; now_ms: number; until_ms: number | null }>(
    db,
    TAKE,
    [limits.maxRps, limits.maxInFlight, limits.circuitFailures, holder, leaseMs, Math.max(1, Math.floor(want))],
  );
  if (!row) throw new Error('provider_pacing has no row: is migration 0017 applied?');
  const slots = row.slots.map(Number);
  if (slots.length > 0) return { slots, probe: row.is_open, nowMs: Number(row.now_ms), windowEndMs: Number(row.window_end_ms) };
  return { slots: null, refusal: row.verdict as Refusal, untilMs: row.until_ms === null ? null : Number(row.until_ms), nowMs: Number(row.now_ms) };
}

/** What a call told about the provider, for the circuit: an answer (even a refusal), a failure (no answer, a 5xx), or no call made. */
export type CallOutcome = 'answered' | 'failed' | 'not_called';

export interface SlotReturn {
  slot: number;
  holder: string;
  outcome: CallOutcome;
  /** The call was the circuit's probe. */
  probe: boolean;
  /** Hold every instance this long from now (Retry-After, or a backoff). */
  holdS: number | null;
  circuitFailures: number;
  circuitOpenS: number;
}

/**
 * Gives the slot back and records the outcome: an answer closes the circuit, a failure counts
 * (the threshold opens it for circuitOpenS); a failure also holds every instance a short, growing
 * backoff (50 ms doubling, at most 2 s) before the next call. Returns the consecutive failures now.
 * The shared row is written only when the outcome changes it (a failure, a hold, the probe, an
 * answer after failures): the common answer frees its slot row alone, and never waits for the
 * row every take locks.
 */
const RETURN = defineStatement('provider_return_slot', `
    with ${NOT_WAITED_TO_DISK},
    freed as (
      update provider_slots set lease_until = '-infinity', holder = null
       where slot = $1 and holder = $2
      returning slot
    ),
    t as (select clock_timestamp() as now),
    paced as (
      update provider_pacing p
         set failures = case $3 when 'answered' then 0 when 'failed' then p.failures + 1 else p.failures end,
             open_until = case
               when $3 = 'answered' then null
               when $3 = 'failed' and p.failures + 1 >= $5 then t.now + make_interval(secs => $6::double precision)
               else p.open_until end,
             probe_until = case when $4 then null else p.probe_until end,
             hold_until = greatest(
               p.hold_until,
               case when $7::double precision is not null then t.now + make_interval(secs => $7::double precision) else '-infinity' end,
               case when $3 = 'failed' then t.now + make_interval(secs => least(0.05 * power(2, least(p.failures, 10)), 2)) else '-infinity' end)
        from t
       where p.id = 1
         and ($3 = 'failed' or $4 or $7::double precision is not null
              or ($3 = 'answered' and (p.failures <> 0 or p.open_until is not null)))
      returning p.failures
    )
    select coalesce((select failures from paced), (select failures from provider_pacing where id = 1)) as failures
    from not_waited`);

/**
 * Two CTEs (`freed`, `closed`) for the statement that records answered calls' outcome, when their
 * slots were handed over to it (pacing.ts, Permit.handOver) instead of going back through the
 * return: each slot of `source` (a relation of slot, holder; slot null for none) is freed if its
 * holder still has it, and an answer closes a circuit that failures opened.
 */
export function answeredSlotsSql(source: string): string {
  return `freed as (
      update provider_slots s set lease_until = '-infinity', holder = null
        from ${source} h
       where s.slot = any (array(select slot from ${source} where slot is not null)) and s.slot = h.slot and s.holder = h.holder
      returning s.slot
    ),
    closed as (
      update provider_pacing p set failures = 0, open_until = null
       where p.id = 1 and (p.failures <> 0 or p.open_until is not null) and exists (select 1 from ${source} where slot is not null)
      returning p.id
    )`;
}

export async function returnSlot(db: Kysely<Tables>, r: SlotReturn): Promise<number> {
  const [row] = await runStatement<{ failures: number }>(db, RETURN, [
    r.slot,
    r.holder,
    r.outcome,
    r.probe,
    r.circuitFailures,
    r.circuitOpenS,
    r.holdS,
  ]);
  return Number(row?.failures ?? 0);
}

const ENSURE_SLOTS = defineStatement('provider_ensure_slots', 'insert into provider_slots (slot) select generate_series(0, $1 - 1) on conflict do nothing');

const READ_PACE = defineStatement('provider_read_pace', `select p.failures, coalesce(p.open_until > clock_timestamp(), false) as open,
                    -- hold_until is '-infinity' when nothing ever held (a subtraction from it is out of range)
                    (case when p.hold_until > clock_timestamp() then extract(epoch from p.hold_until - clock_timestamp()) * 1000 else 0 end)::float8 as held_ms,
                    (select count(*) from provider_slots s where s.slot < $1 and s.lease_until > clock_timestamp())::int as in_flight
               from provider_pacing p where p.id = 1`);

/** Rows for slots 0..maxInFlight-1 (kept when the limit is lowered; only slot < limit counts). */
export async function ensureSlots(db: Kysely<Tables>, maxInFlight: number): Promise<void> {
  await runStatement(db, ENSURE_SLOTS, [
    maxInFlight,
  ]);
}

/** The shared state, for metrics and /v1/stats-like readers: open circuit, hold, failures, calls in flight. */
export async function readPace(db: Kysely<Tables>, maxInFlight: number) {
  const [row] = await runStatement<{ failures: number; open: boolean; held_ms: number; in_flight: number }>(
    db,
    READ_PACE,
    [maxInFlight],
  );
  return row;
}
