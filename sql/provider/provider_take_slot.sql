-- Named statement provider_take_slot, in src/provider/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with not_waited as (select set_config('synchronous_commit', 'off', true) as off),
p as (select * from provider_pacing where id = 1 for update),
-- The clock is read once the row is ours (a statement may wait for it), and never counts a
-- second older than the one already counted.
t as (select p.*, clock_timestamp() as now from p),
c as (
  select t.*, greatest(floor(extract(epoch from t.now))::bigint, t.window_s) as sec,
         case when floor(extract(epoch from t.now))::bigint < t.window_s then 0
              else (extract(epoch from t.now) - floor(extract(epoch from t.now))) * 1000 end as ms
  from t
),
v as (
  select c.now, c.sec, c.ms, c.hold_until, c.open_until, c.probe_until,
         c.failures >= $3 as is_open,
         case when c.window_s = c.sec then c.used else 0 end as used_now,
         -- How many calls may start now: what this second has left, what the spread has let
         -- through by now (call n at n * SPREAD_MS / limit ms), and one while the circuit probes.
         case when c.failures >= $3 then 1
              else least($6::int, $1 - (case when c.window_s = c.sec then c.used else 0 end),
                         floor(c.ms * $1 / 700.0)::int + 1 - (case when c.window_s = c.sec then c.used else 0 end))
         end as allowed,
         case
           when c.hold_until > c.now then 'held'
           when c.failures >= $3 and (coalesce(c.open_until > c.now, false) or coalesce(c.probe_until > c.now, false)) then 'open'
           when (case when c.window_s = c.sec then c.used else 0 end) >= $1 then 'rate'
           -- Past the spread, no call starts in this second (it might reach the provider in the next).
           when c.ms >= 700 then 'rate'
           when c.ms < (case when c.window_s = c.sec then c.used else 0 end) * 700.0 / $1 then 'rate'
           else 'ok'
         end as verdict
  from c
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
    from v, free f
   where s.slot = f.slot and s.lease_until <= v.now
  returning s.slot
),
paced as (
  update provider_pacing p
     set window_s = v.sec, used = v.used_now + (select count(*) from taken),
         probe_until = case when v.is_open then v.now + make_interval(secs => $5::double precision / 1000) else p.probe_until end
    from v
   where p.id = 1 and exists (select 1 from taken)
  returning p.id
)
select array(select slot from taken order by slot) as slots, ((v.sec + 1) * 1000)::float8 as window_end_ms,
       case when v.verdict = 'ok' and not exists (select 1 from taken) then 'in_flight' else v.verdict end as verdict,
       v.is_open,
       (extract(epoch from v.now) * 1000)::float8 as now_ms,
       (case
          when v.verdict = 'held' then extract(epoch from v.hold_until) * 1000
          -- Open: until its period ends; while another instance's probe runs, unknown (asked again soon).
          when v.verdict = 'open' and coalesce(v.open_until > v.now, false) then extract(epoch from v.open_until) * 1000
          when v.verdict = 'rate' and (v.used_now >= $1 or v.ms >= 700) then (v.sec + 1) * 1000
          when v.verdict = 'rate' then v.sec * 1000 + v.used_now * 700.0 / $1
        end)::float8 as until_ms
from v, not_waited;
