-- Query insert_campaign (builder), in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into campaigns (public_id, source, created_by, created_at, updated_at)
values ($1, $2, $3, $4, $5)
returning id;
