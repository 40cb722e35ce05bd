-- Named statement feed_horizon, in src/events/feed-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with s as materialized (select pg_current_snapshot() as snap),
running as (
  select x.transactionid::text::bigint as xid32, bool_or(r.pid is not null) as writes_events
  from pg_locks x
  left join pg_locks r
    on r.virtualtransaction = x.virtualtransaction and r.locktype = 'relation'
   and r.relation = 'events'::regclass and r.mode = 'RowExclusiveLock'
   and r.database = (select oid from pg_database where datname = current_database())
  where x.locktype = 'transactionid' and x.mode = 'ExclusiveLock' and x.granted
  group by 1
)
select least(
  pg_snapshot_xmax(s.snap)::text::bigint,
  (select min(p::text::bigint) from pg_snapshot_xip(s.snap) as p
     left join running l on l.xid32 = (p::text::bigint & 4294967295)
    where l.xid32 is null or l.writes_events)
)::text as horizon
from s;
