import { type DialectAdapter, type Kysely, PostgresAdapter, PostgresDialect, sql } from 'kysely';

/** The advisory lock that serialises migrations across instances (Kysely's own id). */
export const MIGRATION_LOCK_ID = 3853314791062309107n;

/**
 * Kysely's migrator takes a session-level advisory lock outside its transaction: behind a
 * transaction pooler the lock, the migrations and the unlock may each land on another server
 * connection, and a lock taken in a transaction that then fails is never released. Here the lock
 * is transaction-scoped: migrateToLatest runs the migrator inside one transaction, which takes it.
 */
class TransactionLockAdapter extends PostgresAdapter {
  override async acquireMigrationLock(db: Kysely<any>): Promise<void> {
    await sql`select pg_advisory_xact_lock(${sql.lit(MIGRATION_LOCK_ID)})`.execute(db);
  }

  override async releaseMigrationLock(): Promise<void> {
    // Released by the transaction's end.
  }
}

export class GatewayPostgresDialect extends PostgresDialect {
  override createAdapter(): DialectAdapter {
    return new TransactionLockAdapter();
  }
}
