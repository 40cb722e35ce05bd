import type { Decision, RequestStatus } from '../db/types.js';
import type { RequestView } from './schemas.js';

// The answers' bodies, built from our own rows (sql.ts reads them; a new column never leaks into an answer).

export interface RequestRow {
  customer_uuid: string;
  status: RequestStatus;
  decision: Decision | null;
  cpf_masked: string;
  cost_saving_enabled: boolean;
  srd: unknown;
  submitted_at: Date;
  completed_at: Date | null;
  upstream_status: number | null;
  result: unknown;
}

export type Json = Record<string, unknown> | null | undefined;

// Views are built field by field (and sent without a second check), so a new column never leaks
// into an answer; only `result` is passed whole, being by contract the stored callback body.

function buildSrd(srd: Json): RequestView['srd'] {
  if (!srd) return null;
  const a = srd.address as Json;
  return {
    grossIncome: srd.grossIncome,
    housingSpends: srd.housingSpends,
    cardSpends: srd.cardSpends,
    loanSpends: srd.loanSpends,
    address: a ? { street: a.street, number: a.number, complement: a.complement, city: a.city, state: a.state } : undefined,
    occupation: srd.occupation,
    desiredCreditLimit: srd.desiredCreditLimit,
  } as RequestView['srd'];
}

/** The contract's `result` is the callback body as stored (validated when it arrived), so it goes out whole. */
export function buildResult(body: Json): RequestView['result'] {
  return body ? (body as RequestView['result']) : null;
}

export function buildRequestView(row: RequestRow): RequestView {
  return {
    customerUuid: row.customer_uuid,
    status: row.status,
    decision: row.decision,
    cpfMasked: row.cpf_masked,
    costSavingEnabled: row.cost_saving_enabled,
    srd: buildSrd(row.srd as Json),
    submittedAt: row.submitted_at.toISOString(),
    completedAt: row.completed_at ? row.completed_at.toISOString() : null,
    upstreamStatus: row.upstream_status,
    result: buildResult(row.result as Json),
  };
}
