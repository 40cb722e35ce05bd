-- Query read_stray_page_of_kind_filtered (builder), in src/stats/callbacks.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select c.id, c.customer_uuid, c.received_at, c.outcome, c.error, c.raw_body,
       to_char(c.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_t
  from callbacks c
 where c.outcome = $1
   and c.received_at >= $2::timestamptz
   and (c.received_at, c.id) < ($3::timestamptz, $4::bigint)
 order by c.received_at desc, c.id desc
 limit $5;
