-- Query disable_failing_endpoint (builder), in src/events/endpoint-limits-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with disabled as (
  update event_endpoints
  set status = 'disabled', updated_at = $1::timestamptz,
      disabled_reason = 'every attempt failed since ' || to_char(failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '; last: ' || $2::text
  where key = $3 and status = 'active' and failing_since is not null
    and failing_since <= $4::timestamptz - make_interval(secs => $5::double precision)
  returning id, shown_url, disabled_reason, failing_since
),
source as (
  select 'endpoint.disabled'::text as type, x.id as customer_uuid, $6::timestamptz as created_at,
         null::bigint as request_id, null::bigint as callback_id,
         jsonb_build_object('endpointId', x.id, 'url', x.shown_url, 'disabledReason', x.disabled_reason,
                            'failingSince', to_char(x.failing_since at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) as data
  from disabled x
),

new_events as (
  insert into events (public_id, type, customer_uuid, created_at, request_id, callback_id, data)
  select 'evt_' || lpad(to_hex((extract(epoch from clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(gen_random_uuid()::text), 1, 20), s.type, s.customer_uuid, s.created_at,
         s.request_id, s.callback_id, s.data
  from source s
  order by s.customer_uuid
  returning id
)
select count(*)::int as n from new_events;
