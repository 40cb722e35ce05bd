// Whether `npm test` measures coverage: where the whole suite runs, on PostgreSQL (DATABASE_URL set).
// Without DATABASE_URL the tests that need a real server are left out (scripts/test-notice.mjs says
// which), so the figure would measure less than the suite and hold it to floors (.taprc) set for the
// whole; and collecting it cost about 4% of a PGlite run's CPU (docs/testing.md). An argument
// that asks for coverage (tap's own `--no-disable-coverage`, or a `--coverage-report`) or already
// turns it off is left alone.

const ASKS_ABOUT_COVERAGE = /^(--(no-)?disable-coverage|--coverage-report|--show-full-coverage|--allow-(incomplete|empty)-coverage)(=|$)/;

/** tap's arguments for this run: `--disable-coverage` first on PGlite, unless an argument says otherwise. */
export function withCoverageDefault(args, env) {
  if (env.DATABASE_URL || args.some((arg) => ASKS_ABOUT_COVERAGE.test(arg))) return args;
  return ['--disable-coverage', ...args];
}
