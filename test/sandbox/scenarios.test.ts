import t from 'tap';
import { decide } from '../../src/provider/schemas.js';
import { SANDBOX_DEFAULT_CPFS } from '../../src/sandbox/config.js';
import { limitFor, riskBandOf, underwrite } from '../../src/sandbox/scenarios.js';

const CPFS = SANDBOX_DEFAULT_CPFS;
/** Fabricated 11-digit strings, enough to see the whole spread of derived outcomes. */
const OTHER_CPFS = Array.from({ length: 400 }, (_, i) => String(10_000_000_000 + i * 7_919_113));
const request = (cpf: string, costSavingEnabled = false, srd?: { grossIncome: number; [k: string]: unknown }) => ({
  customerUuid: 'c',
  cpf,
  costSavingEnabled,
  ...(srd ? { srd } : {}),
});

t.test('risk bands run from 1 (score 800+) to 5 (below 350)', async (t) => {
  t.same([1000, 800, 799, 650, 649, 500, 499, 350, 349, 0].map(riskBandOf), [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
});

t.test('the limit grows with the score and is capped by free income and the desired limit', async (t) => {
  t.equal(limitFor(1000, undefined), 15_000);
  t.equal(limitFor(500, undefined), 2_500);
  t.equal(limitFor(1000, { grossIncome: 5000, housingSpends: 1500, cardSpends: 500, loanSpends: 500 }), 5_000);
  t.equal(limitFor(1000, { grossIncome: 1000, housingSpends: 2000 }), 0, 'no free income, no limit');
  t.equal(limitFor(1000, { grossIncome: 50_000, desiredCreditLimit: 3210.75 }), 3210, 'whole reais, never above the wish');
});

t.test('the approve CPF is approved even when its reported income is tiny', async (t) => {
  const out = underwrite(request(CPFS.approve, false, { grossIncome: 0 }), CPFS);
  t.ok(out.limit >= 100);
  t.equal(decide(out), 'approved');
  const rich = underwrite(request(CPFS.approve, false, { grossIncome: 20_000, desiredCreditLimit: 4000 }), CPFS);
  t.equal(rich.limit, 4000, 'the desired limit bounds the approval');
});

t.test('the standard reject CPF is declined whatever it reports or enables', async (t) => {
  for (const costSavingEnabled of [false, true]) {
    const out = underwrite(request(CPFS.standardReject, costSavingEnabled, { grossIncome: 90_000 }), CPFS);
    t.equal(out.limit, 0);
    t.equal(out.costSavingEnabled, costSavingEnabled);
    t.equal(decide(out), 'declined');
  }
});

t.test('other CPFs spread over every decision, deterministically', async (t) => {
  const decisions = new Set<string>();
  const wrong: string[] = [];
  for (const cpf of OTHER_CPFS) {
    const off = underwrite(request(cpf, false), CPFS);
    const on = underwrite(request(cpf, true), CPFS);
    decisions.add(decide(off));
    decisions.add(decide(on));
    if (JSON.stringify(underwrite(request(cpf, false), CPFS)) !== JSON.stringify(off)) wrong.push(`${cpf}: not deterministic`);
    if (off.score >= 0) {
      if (off.score > 1000 || !Number.isInteger(off.limit) || off.limit < 0) wrong.push(`${cpf}: out of range`);
      if (off.riskBand !== riskBandOf(off.score)) wrong.push(`${cpf}: band does not follow the score`);
      if (off.limit > 0 !== off.score >= 500) wrong.push(`${cpf}: approval does not start at 500`);
    } else if (off.riskBand !== -1 || off.limit !== -1) {
      wrong.push(`${cpf}: a -1 score without -1 band and limit`);
    }
    if (on.score === -1 && off.score >= 400) wrong.push(`${cpf}: cost saving filtered a low-risk customer`);
  }
  t.same(wrong, []);
  t.same([...decisions].sort(), ['approved', 'declined', 'filtered', 'no_score']);
});
