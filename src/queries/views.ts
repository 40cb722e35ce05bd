import type { Decision, RequestStatus } from '../db/types.js';
import { type RequestView, submittedAtView } from '../requests/schemas.js';

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
// into an answer.

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

/**
 * The callback body as stored, limited to the provider's documented fields: rows stored before
 * the callback kept only those may hold more (a CPF, say), which never leaves the service.
 */
export function buildResult(body: Json): RequestView['result'] {
  if (!body) return null;
  const response = (body.response ?? {}) as Record<string, unknown>;
  return {
    customerUuid: body.customerUuid,
    started: body.started,
    finished: body.finished,
    serviceType: body.serviceType,
    response: { costSavingEnabled: response.costSavingEnabled, score: response.score, riskBand: response.riskBand, limit: response.limit },
  } as RequestView['result'];
}

export function buildRequestView(row: RequestRow): RequestView {
  return {
    customerUuid: row.customer_uuid,
    status: row.status,
    decision: row.decision,
    cpfMasked: row.cpf_masked,
    costSavingEnabled: row.cost_saving_enabled,
    srd: buildSrd(row.srd as Json),
    submittedAt: submittedAtView(row.status, row.submitted_at),
    completedAt: row.completed_at ? row.completed_at.toISOString() : null,
    upstreamStatus: row.upstream_status,
    result: buildResult(row.result as Json),
  };
}
