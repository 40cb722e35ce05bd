-- Query read_stray_page (builder), in src/stats/callbacks.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select * from (
  (
select c.id, c.customer_uuid, c.received_at, c.outcome, c.error, c.raw_body,
       to_char(c.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_t
  from callbacks c
 where c.outcome = $1


 order by c.received_at desc, c.id desc
 limit $2)
  union all
  (
select c.id, c.customer_uuid, c.received_at, c.outcome, c.error, c.raw_body,
       to_char(c.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_t
  from callbacks c
 where c.outcome = $3


 order by c.received_at desc, c.id desc
 limit $4)
) s
order by s.received_at desc, s.id desc
limit $5;
