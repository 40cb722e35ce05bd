import { createHash } from 'node:crypto';
import type { Srd, UnderwritingRequest, UnderwritingResult } from '../provider/schemas.js';
import type { ScenarioCpfs } from './config.js';

type UnderwritingResponse = UnderwritingResult['response'];

/** The provider's "cannot score / filtered" answer: every figure -1. */
const NO_SCORE = { score: -1, riskBand: -1, limit: -1 } as const;

/** Below this score the cost-saving funnel filters a customer out before the expensive sources. */
export const COST_SAVING_CUTOFF = 400;
/** Below this score the standard flow declines (limit 0). */
export const APPROVAL_CUTOFF = 500;
/** The approve scenario's score range, inclusive. */
export const APPROVE_SCORE_RANGE = [600, 1000] as const;
/** The approve scenario always grants at least this (R$): the scenario promises a limit above zero. */
export const APPROVE_MINIMUM_LIMIT = 100;

/** 1 (lowest risk) to 5 (highest), from the score. */
export function riskBandOf(score: number): number {
  if (score >= 800) return 1;
  if (score >= 650) return 2;
  if (score >= APPROVAL_CUTOFF) return 3;
  if (score >= 350) return 4;
  return 5;
}

/** Deterministic figures from the CPF alone: the same CPF always draws the same numbers. */
function draws(cpf: string): { first: number; second: number } {
  const digest = createHash('sha256').update(`underwriting-sandbox:${cpf}`).digest();
  return { first: digest.readUInt32BE(0), second: digest.readUInt32BE(4) };
}

/**
 * The limit for an approved score: (score - 400) x R$ 25 rounded down to R$ 100 (R$ 2,500 at 500,
 * R$ 15,000 at 1000), capped by twice the monthly income left after the reported spends, and by
 * the desired limit. Whole reais.
 */
export function limitFor(score: number, srd: Srd | undefined): number {
  let limit = Math.floor(((score - 400) * 25) / 100) * 100;
  if (srd) {
    const spends = (srd.housingSpends ?? 0) + (srd.cardSpends ?? 0) + (srd.loanSpends ?? 0);
    limit = Math.min(limit, 2 * Math.max(0, srd.grossIncome - spends));
    if (srd.desiredCreditLimit !== undefined) limit = Math.min(limit, srd.desiredCreditLimit);
  }
  return Math.max(0, Math.floor(limit));
}

/** What the simulated model answers for one request (a pure function of the request). */
export function underwrite(request: UnderwritingRequest, cpfs: ScenarioCpfs): UnderwritingResponse {
  const { cpf, costSavingEnabled, srd } = request;
  const { first, second } = draws(cpf);

  if (cpf === cpfs.costSavingReject && costSavingEnabled) return { costSavingEnabled, ...NO_SCORE };
  if (cpf === cpfs.standardReject) {
    const score = 100 + (first % 200);
    return { costSavingEnabled, score, riskBand: riskBandOf(score), limit: 0 };
  }
  if (cpf === cpfs.approve) {
    const [low, high] = APPROVE_SCORE_RANGE;
    const score = low + (first % (high - low + 1));
    return { costSavingEnabled, score, riskBand: riskBandOf(score), limit: Math.max(APPROVE_MINIMUM_LIMIT, limitFor(score, srd)) };
  }

  // Any other CPF: one in 50 cannot be scored; otherwise a score in 0-1000 and the rules above.
  if (second % 50 === 0) return { costSavingEnabled, ...NO_SCORE };
  const score = first % 1001;
  if (costSavingEnabled && score < COST_SAVING_CUTOFF) return { costSavingEnabled, ...NO_SCORE };
  const limit = score < APPROVAL_CUTOFF ? 0 : limitFor(score, srd);
  return { costSavingEnabled, score, riskBand: riskBandOf(score), limit };
}
