-- Named statement mark_submitted, in src/requests/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

with input as (
  select * from json_to_recordset($1::json) as i(id bigint, upstream_status int, at timestamptz, slot int, holder text)
),
locked as (
  select r.id from underwriting_requests r
   where r.id = any (array(select id from input))
   order by r.customer_uuid collate "C"
   for update
),
marked as (
  update underwriting_requests r
     set status = case when r.status = 'submitting' then 'submitted' else r.status end,
         upstream_status = i.upstream_status, updated_at = i.at
    from input i
   where r.id = any (array(select id from locked)) and r.id = i.id
  returning r.id
),
freed as (
  update provider_slots s set lease_until = '-infinity', holder = null
    from input h
   where s.slot = any (array(select slot from input where slot is not null)) and s.slot = h.slot and s.holder = h.holder
  returning s.slot
),
closed as (
  update provider_pacing p set failures = 0, open_until = null
   where p.id = 1 and (p.failures <> 0 or p.open_until is not null) and exists (select 1 from input where slot is not null)
  returning p.id
)
select m.id from marked m;
