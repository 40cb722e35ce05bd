-- Query claim_campaign_key (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

update campaigns set idempotency_key = null
where idempotency_key = $1 and created_at <= $2;

insert into campaigns (public_id, source, created_by, created_at, updated_at, idempotency_key)
values ($1, $2, $3, $4, $5, $6)
on conflict (idempotency_key) where idempotency_key is not null do nothing
returning id;

select id, public_id, source, status, accepted, rejected, rejected_lines, uploaded_at, upload_error, updated_at, body_digest
  from campaigns where idempotency_key = $1 and created_at > $2;
