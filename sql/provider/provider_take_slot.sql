-- Named statement provider_take_slot, in src/provider/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with not_waited as (select set_config('synchronous_commit', 'off', true) as off),
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
         c.window_s = c.f + 1 or (c.window_s <= c.f and c.frac >= 700) as tail,
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
              when u.tail then least($6::int, $1 - u.used_now, floor((u.ms - 700) * $1 / 300.0)::int + 1 - u.next_now)
              else least($6::int, $1 - u.used_now, floor(u.ms * $1 / 700.0)::int + 1 - u.used_now)
         end as allowed,
         case
           when u.hold_until > u.now then 'held'
           when u.failures >= $3 and (coalesce(u.open_until > u.now, false) or coalesce(u.probe_until > u.now, false)) then 'open'
           when u.used_now >= $1 then 'rate'
           when not u.tail and u.ms < u.used_now * 700.0 / $1 then 'rate'
           when u.tail and u.ms - 700 < u.next_now * 300.0 / $1 then 'rate'
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
          when v.verdict = 'rate' and v.tail then v.sec * 1000 + 700 + v.next_now * 300.0 / $1
          when v.verdict = 'rate' then v.sec * 1000 + v.used_now * 700.0 / $1
        end)::float8 as until_ms
from v, not_waited;
