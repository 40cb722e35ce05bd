-- Named statement campaign_provider_paused, in src/campaigns/sql.ts. Written by `npm run sql:snapshot`: edit the source, then run it.

select coalesce(open_until > clock_timestamp(), false) or hold_until > clock_timestamp() as paused
  from provider_pacing where id = 1;
