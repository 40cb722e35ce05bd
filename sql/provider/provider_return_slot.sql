-- Named statement provider_return_slot, in src/provider/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with not_waited as (select set_config('synchronous_commit', 'off', true) as off),
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
from not_waited;
