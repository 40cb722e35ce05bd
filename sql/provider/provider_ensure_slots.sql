-- Named statement provider_ensure_slots, in src/provider/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into provider_slots (slot) select generate_series(0, $1 - 1) on conflict do nothing;
