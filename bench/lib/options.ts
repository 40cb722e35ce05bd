/**
 * The options `npm run bench` accepts. Every option the harness reads must match here, or the
 * command line refuses it before anything runs (test/bench/options.test.ts).
 */
export const BENCH_OPTIONS = /^--(quick|profile|probe|probe-profile|own-postgres|only=[a-z,-]+|states=[a-d,]+|sizes=[0-9kmKM,]+|state-push=(off|on|both)|long-poll-callbacks=\d+|delivery-rate=\d+|delivery-endpoints=(one|troubled)|rate=\d+|rounds=\d+|lines=\d+|outage-s=\d+|campaign-rps=\d+|tracing|tracing=(on|off|aa))$/;

export const BENCH_OPTION_DETAILS = [
  '  --quick                    short rounds, for a smoke run',
  '  --only=a,b                 callback, callback-push, submit, get-one, long-poll, delivery, cold-start,',
  '                             campaign (only when named: issue 37, minutes long)',
  '  --lines=N, --outage-s=N    the campaign: lines in its file (100000), its provider outage in seconds (30)',
  '  --campaign-rps=N           the campaign\'s provider limit, at the sandbox and both gateways (200)',
  '  --states=a,b,c,d           the callback A/B in these bench states (default a,b): a never analysed,',
  '                             b analysed empty then grown, c vacuum analysed, d own cluster with autovacuum',
  '  --sizes=10k,100k,1m        stored requests in each state (default 10k)',
  '  --state-push=off|on|both   the states\' A/B with outcome events pushed to a receiver, or both ways',
  '  --profile, --probe         CPU profiles, and what the gateway saw inside each run',
  '  --probe-profile            --probe, and a CPU profile of each run of each side (bench/results/profiles/)',
  '  --own-postgres             a PostgreSQL of its own, tuned as bench/README.md says',
  '  --long-poll-callbacks=N    --delivery-rate=N',
  '  --delivery-endpoints=one|troubled   delivery: one configured receiver (default), or five endpoints made',
  '                             through /v1/endpoints: two healthy, one slow (2 s), one at 20/s, one down',
  '  --rounds=N                 measured A/B rounds a side (default 3)',
  '  --rate=N                   A/B scenarios offer N requests/s instead of as many as answered (no wrk):',
  '                             CPU per answer compared at equal load, e.g. with --tracing',
  '  --tracing[=on|off|aa]      tracing on against off (on), this build against BENCH_TRACING_BASE_ENTRY (off),',
  '                             or both sides off (aa): docs/tracing.md',
];
