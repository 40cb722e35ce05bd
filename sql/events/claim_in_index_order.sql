-- Query claim_in_index_order (builder), in src/events/queue-sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

set local enable_sort = off;
