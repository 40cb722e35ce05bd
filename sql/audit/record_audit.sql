-- Query record_audit (builder), in src/audit/trail.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

insert into "audit_log" ("at", "action", "actor", "subject", "counts") values ($1, $2, $3, $4, $5);
