import { type Kysely, sql } from 'kysely';

// Statistics that outlive retention: what the sweep deletes is first folded into these counts, per
// UTC hour (so hour buckets of purged days stay exact; a day is 24 rows). A purged row is either
// here or live in its table, never both: the fold and the delete commit together.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('statistics_hourly')
    // Start of a UTC hour. Requests count in the hour they were submitted; callbacks in the hour they arrived.
    .addColumn('hour', 'timestamptz', (c) => c.primaryKey())
    .addColumn('submitted', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('completed', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('expired', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('submit_failed', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('approved', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('declined', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('no_score', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('filtered', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('unmatched', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('invalid', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();

  // Turnaround (submit -> callback) of purged completed requests as a fixed log-scale histogram:
  // bin b holds turnarounds in [2^(b/8), 2^((b+1)/8)) ms. Sparse: only bins that hold something.
  await db.schema
    .createTable('turnaround_hourly')
    .addColumn('hour', 'timestamptz', (c) => c.notNull())
    .addColumn('bin', 'smallint', (c) => c.notNull())
    .addColumn('requests', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('turnaround_hourly_pkey', ['hour', 'bin'])
    .execute();

  // Callbacks that matched nothing or failed validation, newest first by kind: the console's lists,
  // the last 24 h counts and their retention. Partial, so the matched callbacks' hot path never
  // touches it.
  await sql`create index callbacks_stray on callbacks (outcome, received_at desc, id desc)
    where outcome in ('unmatched', 'invalid')`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index callbacks_stray`.execute(db);
  await db.schema.dropTable('turnaround_hourly').execute();
  await db.schema.dropTable('statistics_hourly').execute();
}
