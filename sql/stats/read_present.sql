-- Query read_present (builder), in src/stats/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true);

select p.pending, p.oldest_pending,
       -- What the expiry sweep ends: a queued request is not waiting for a callback, and never expires.
       (select min(r.submitted_at) from underwriting_requests r where r.status = 'submitted') as oldest_submitted,
       (select count(*) from callbacks c
         where c.outcome = 'unmatched' and c.received_at >= $1)::bigint as unmatched,
       (select count(*) from callbacks c
         where c.outcome = 'invalid' and c.received_at >= $2)::bigint as invalid,
       d.deliveries_pending + u.n as deliveries_pending, least(d.oldest_delivery_pending, u.oldest) as oldest_delivery_pending,
       (select count(*) from event_deliveries x where x.status = 'dead')::bigint as deliveries_dead,
       (select coalesce(sum(k.n), 0) from event_endpoints ep
          cross join lateral (select count(*) as n from event_deliveries x where x.url_key = ep.key and x.status = 'dead') k)::bigint
         as deliveries_dead_kept
  from (select count(*)::bigint as pending, min(r.submitted_at) as oldest_pending
          from underwriting_requests r
         -- The one-in-flight index's own predicate: queued requests await the provider too
         -- (their submitted_at is when they were queued).
         where r.status in ('queued', 'submitting', 'submitted')) p,
       (select count(*)::bigint as deliveries_pending, min(x.queued_at) as oldest_delivery_pending
          from event_deliveries x
         where x.status = 'pending') d,
       (
select (select count(*) from event_dispatch c left join event_endpoints p on p.key = c.url_key
          join events e on (e.tx_id, e.id) > (c.tx_id, c.event_id) and (p.types is null or e.type = any(p.types))
         where c.url_key = any($3::text[])) as n,
       (select min(f.created_at) from event_dispatch c left join event_endpoints p on p.key = c.url_key
          cross join lateral (select e.created_at from events e where (e.tx_id, e.id) > (c.tx_id, c.event_id) and (p.types is null or e.type = any(p.types))
                               order by e.tx_id, e.id limit 1) f
         where c.url_key = any($4::text[])) as oldest) u;
