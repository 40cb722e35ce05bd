import { performance } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import type { ChannelListener } from '../db/notifications.js';
import type { DB } from '../db/types.js';
import { AppError, notFound } from '../errors.js';
import type { CustomerView } from './schemas.js';
import { readCustomer } from './sql.js';

export const tooManyWaiters = () =>
  new AppError(503, 'too_many_waiters', 'too many long-polls are waiting on this instance; retry shortly or poll without wait');

export interface LongPollDeps {
  db: Kysely<DB>;
  /** The process's listener on RESULTS_CHANNEL (notification payload: customerUuid). */
  listener: ChannelListener | undefined;
  /** Aborted when the app starts closing: waiters answer with what is stored, at once. */
  closing: AbortSignal;
  /** Tells the waiter gauge about one more (+1) or one fewer (-1) waiter. */
  onWaiting(delta: 1 | -1): void;
}

async function read(db: Kysely<DB>, customerUuid: string): Promise<CustomerView> {
  const view = await readCustomer(db, customerUuid);
  if (!view) {
    // "lookup" is a valid customerUuid, so GET /v1/underwritings/lookup stays a customer read; but
    // when there is no such customer the caller almost surely meant the lookup by CPF.
    const hint = customerUuid === 'lookup' ? '; to find requests by CPF, POST /v1/underwritings/lookup with a JSON body {"cpf": "..."}' : '';
    throw notFound(`no underwriting request for customer ${customerUuid}${hint}`);
  }
  return view;
}

/**
 * One customer, held until the newest request has a result (stored by any instance) or waitS
 * seconds pass. The waiter is registered before state is read, and a wake that comes during a
 * read is kept for the next wait, so no committed result can slip by unnoticed.
 */
export async function readCustomerWaiting(deps: LongPollDeps, customerUuid: string, waitS: number): Promise<CustomerView> {
  if (waitS <= 0 || deps.closing.aborted || !deps.listener) return read(deps.db, customerUuid);
  const deadline = performance.now() + waitS * 1000;
  const waiter = deps.listener.register(customerUuid);
  if (!waiter) {
    const view = await read(deps.db, customerUuid);
    if (view.result !== null) return view;
    throw tooManyWaiters();
  }
  deps.onWaiting(1);
  try {
    for (;;) {
      const view = await read(deps.db, customerUuid);
      const remaining = deadline - performance.now();
      if (view.result !== null || remaining <= 0 || deps.closing.aborted) return view;
      await waiter.next(remaining, deps.closing);
    }
  } finally {
    waiter.cancel();
    deps.onWaiting(-1);
  }
}
