// npm test without DATABASE_URL runs on embedded PGlite, where the tests that need a real
// PostgreSQL server cannot run: say so in one line instead of silently running fewer assertions.
if (!process.env.DATABASE_URL) {
  process.stderr.write(
    'npm test: DATABASE_URL is not set, so the tests that need a real PostgreSQL server (database outages, ' +
      'several instances sharing one database, PostgreSQL-only storage checks, the planner\'s plans at scale) are left out. ' +
      'Set DATABASE_URL=postgres://user@host:5432/db (a role that may create databases) to run them; coverage is measured there ' +
      '(here only with --no-disable-coverage, and then it leaves those tests out).\n',
  );
}
