import type { Kysely } from 'kysely';
import { type Actor, type AuditFilter, readAuditPage, recordAudit, type SubjectRef, subjectHasher } from '../audit/trail.js';
import type { Tables } from '../db/types.js';
import { AppError, notFound } from '../http/errors.js';
import { cursorCodec } from '../http/cursor.js';
import type { PersonalDataMetrics } from './metrics.js';
import { DEFAULT_AUDIT_PAGE, type ExportView } from './schemas.js';
import { type ErasedCounts, eraseStored, readStored } from './sql.js';
import { resolveSubject } from './subject.js';
import { exportView } from './views.js';

export interface PersonalDataDeps {
  db: Kysely<Tables>;
  clock: () => Date;
  /** Every CPF_HASH_KEY, newest first. */
  cpfHashKeys: readonly string[];
  metrics: PersonalDataMetrics;
}

/** The data subject's rights (access, erasure), each answered and audited in one transaction, and counted. */
export function personalDataService(deps: PersonalDataDeps) {
  const subjectOf = subjectHasher(deps.cpfHashKeys[0]!);
  const cpfOf = (ref: SubjectRef) => ('cpf' in ref ? ref.cpf : undefined);
  // A key of its own, so an audit cursor is never a valid list cursor and says nothing of CPF hashes.
  const cursors = cursorCodec(deps.cpfHashKeys[0]!, 'audit-cursor');

  return {
    /** Everything stored about the subject; 404 when nothing is (the attempt is audited all the same). */
    async exportSubject(ref: SubjectRef, actor: Actor): Promise<ExportView> {
      const view = await deps.db
        .transaction()
        .setIsolationLevel('repeatable read')
        .execute(async (tx) => {
          const subject = await resolveSubject(tx, ref, deps.cpfHashKeys);
          const stored = await readStored(tx, subject);
          const counts = { requests: stored.requests.length, callbacks: stored.callbacks.length, events: stored.events.length };
          await recordAudit(tx, { at: deps.clock(), action: 'export', actor, subject: subjectOf(ref), counts });
          return stored.requests.length + stored.callbacks.length + stored.events.length === 0 ? undefined : exportView(stored, subject.customerUuids, cpfOf(ref));
        });
      if (!view) {
        deps.metrics.exported('not_found');
        throw notFound('nothing is stored about this subject');
      }
      deps.metrics.exported('exported');
      return view;
    },

    /** Deletes every row of the subject; 409 in_flight, nothing erased, while a request awaits its callback. */
    async eraseSubject(ref: SubjectRef, actor: Actor): Promise<ErasedCounts> {
      try {
        const counts = await deps.db.transaction().execute(async (tx) => {
          const subject = await resolveSubject(tx, ref, deps.cpfHashKeys);
          const erased = await eraseStored(tx, subject);
          await recordAudit(tx, { at: deps.clock(), action: 'erase', actor, subject: subjectOf(ref), counts: { ...erased } });
          return erased;
        });
        deps.metrics.erased('erased', counts);
        return counts;
      } catch (err) {
        if (err instanceof AppError && err.code === 'in_flight') deps.metrics.erased('in_flight');
        throw err;
      }
    },

    /** One page of the audit trail, newest first. */
    async auditPage(filter: AuditFilter, limit: number | undefined, cursor: string | undefined) {
      const after = cursor === undefined ? undefined : cursors.decode(cursor);
      const page = await readAuditPage(deps.db, filter, after, limit ?? DEFAULT_AUDIT_PAGE);
      return { items: page.items, nextCursor: page.next ? cursors.encode(page.next) : null };
    },
  };
}
export type PersonalDataService = ReturnType<typeof personalDataService>;
