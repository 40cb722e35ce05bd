import t from 'tap';
import { decide, toUtcInstant, underwritingResultSchema } from '../../src/provider/schemas.js';

t.test('provider date-times become instants PostgreSQL reads the same in any session zone', async (t) => {
  t.equal(toUtcInstant('2026-11-22T03:00:00.000Z'), '2026-11-22T03:00:00.000Z');
  t.equal(toUtcInstant('2026-11-22T03:00:00'), '2026-11-22T03:00:00Z', 'no zone: UTC, as the spec says');
  t.equal(toUtcInstant('2026-11-22T03:00:00.5+0000'), '2026-11-22T03:00:00.5+00:00');
  t.equal(toUtcInstant('2026-11-22T03:00:00-0300'), '2026-11-22T03:00:00-03:00');
  t.equal(toUtcInstant('2026-11-22T03:00:00+05'), '2026-11-22T03:00:00+05:00');
  t.equal(toUtcInstant('2026-11-22T03:00:00-03:00'), '2026-11-22T03:00:00-03:00');
});

t.test('the callback schema accepts every unambiguous ISO 8601 date-time and refuses the rest', async (t) => {
  const body = (started: string) => ({
    customerUuid: 'c-1',
    started,
    finished: '2026-11-22T03:00:10Z',
    serviceType: 'CREDIT_SCORE',
    response: { costSavingEnabled: false, score: 700, riskBand: 2, limit: 1000 },
  });
  for (const ok of ['2026-11-22T03:00:00Z', '2026-11-22T03:00:00', '2026-11-22T03:00:00.123+0000', '2026-11-22T03:00:00-03:00']) {
    t.ok(underwritingResultSchema.safeParse(body(ok)).success, ok);
  }
  for (const bad of ['2026-02-30T03:00:00Z', '2026-11-22', 'yesterday', '2026-11-22T03:00:00+5', '22/11/2026 03:00']) {
    t.notOk(underwritingResultSchema.safeParse(body(bad)).success, bad);
  }
});

t.test('decisions follow the contract table', async (t) => {
  t.equal(decide({ score: -1, costSavingEnabled: true, limit: -1 }), 'filtered');
  t.equal(decide({ score: -1, costSavingEnabled: false, limit: -1 }), 'no_score');
  t.equal(decide({ score: 500, costSavingEnabled: false, limit: -1 }), 'no_score');
  t.equal(decide({ score: 700, costSavingEnabled: true, limit: 2500 }), 'approved');
  t.equal(decide({ score: 200, costSavingEnabled: false, limit: 0 }), 'declined');
});
