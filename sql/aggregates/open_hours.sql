-- Query open_hours (builder), in src/aggregates/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select s.hour from statistics_hourly s
 where s.closed_at is null and s.hour < $1 and true
 order by s.hour
 limit $2;
