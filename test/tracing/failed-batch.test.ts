import { ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import t from 'tap';
import { recordResults, type ValidResult } from '../../src/requests/complete.js';
import type { LateSpan, SpanParent } from '../../src/tracing/spans.js';
import { customer, insertRequest, resultBody } from '../callbacks/fixtures.js';
import { freshDatabase, SERVER_URL } from '../helpers/database.js';
import { databaseBehindRelay } from '../helpers/relay.js';

// A batch of callbacks (one statement, db/group-commit.ts) that fails as a whole because the
// database is out of reach is not written again item by item: each callback's 503 was decided by
// that one statement. Its failed span was told under the first traced callback only, so the others'
// traces showed a 503 with nothing under it.

const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('test');

/** A callback's server span, as the route starts it, for the result to hang from. */
function serverSpan(name: string): { parent: SpanParent; spanId: string } {
  const span = tracer.startSpan(name, { kind: SpanKind.SERVER }, ROOT_CONTEXT);
  span.end();
  return { parent: { tracer, context: trace.setSpan(ROOT_CONTEXT, span) }, spanId: span.spanContext().spanId };
}

/**
 * A callback's server span that begins late, as the route's does when no traceparent came: at its
 * answer, after the batch has failed. spanId() is its id once begun.
 */
function lateServerSpan(name: string): { origin: LateSpan; spanId: () => string | undefined } {
  let begun: SpanParent | undefined;
  const waiting: Array<(parent: SpanParent) => void> = [];
  const origin: LateSpan = {
    rootTraceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    begin() {
      if (begun) return begun;
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER }, ROOT_CONTEXT);
      span.end();
      begun = { tracer, context: trace.setSpan(ROOT_CONTEXT, span) };
      for (const then of waiting.splice(0)) then(begun);
      return begun;
    },
    whenBegun(then) {
      if (begun) then(begun);
      else waiting.push(then);
    },
  };
  return { origin, spanId: () => (begun ? trace.getSpanContext(begun.context)?.spanId : undefined) };
}

function result(cust: string, parent: SpanParent | LateSpan | undefined): ValidResult {
  const body = resultBody(cust);
  const json = JSON.stringify(body);
  return { receivedAt: new Date(), peer: null, rawBody: Buffer.from(json), customerUuid: cust, started: body.started, finished: body.finished, body: json, decision: 'approved', trace: parent };
}

t.test("a batch the database could not be reached for: the failed statement's span under every traced callback's span", async (t) => {
  const { database, cut } = SERVER_URL
    ? await databaseBehindRelay(t).then(({ database, relay }) => ({ database, cut: () => relay.cut() }))
    : await freshDatabase(t).then((database) => ({ database, cut: () => database.pglite!.close() }));
  const customers = [customer('batch-a'), customer('batch-b'), customer('batch-c')];
  for (const cust of customers) await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const spans = [serverSpan('POST a'), serverSpan('POST b')];
  exporter.reset();
  await cut();
  // The third callback is not traced (a sampler dropped it, say): it gets no span of its own.
  await t.rejects(recordResults(database.db, [result(customers[0]!, spans[0]!.parent), result(customers[1]!, spans[1]!.parent), result(customers[2]!, undefined)], { skewS: 300 }));
  const failed = exporter.getFinishedSpans().filter((s) => s.name === 'record_results');
  t.same(
    failed.map((s) => s.parentSpanContext?.spanId).sort(),
    spans.map((s) => s.spanId).sort(),
    'one failed record_results under each traced callback',
  );
  for (const span of failed) t.equal(span.status.code, 2, 'failed');
});

t.test('a batch the database refused as a whole (group commit writes it again item by item, each under its own span) is told once, under the first', async (t) => {
  const database = await freshDatabase(t);
  const customers = [customer('refused-a'), customer('refused-b')];
  for (const cust of customers) await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const spans = [serverSpan('POST a'), serverSpan('POST b')];
  exporter.reset();
  const refused = { ...result(customers[1]!, spans[1]!.parent), started: '0000-01-01T00:00:00Z' };
  await t.rejects(recordResults(database.db, [result(customers[0]!, spans[0]!.parent), refused], { skewS: 300 }));
  const failed = exporter.getFinishedSpans().filter((s) => s.name === 'record_results');
  t.same(failed.map((s) => s.parentSpanContext?.spanId), [spans[0]!.spanId], "under the first only: each callback's own attempt follows");
});

t.test('callbacks whose spans begin only at their answer (no traceparent came): the failed span is made under each once it has begun', async (t) => {
  const { database, cut } = SERVER_URL
    ? await databaseBehindRelay(t).then(({ database, relay }) => ({ database, cut: () => relay.cut() }))
    : await freshDatabase(t).then((database) => ({ database, cut: () => database.pglite!.close() }));
  const customers = [customer('late-a'), customer('late-b')];
  for (const cust of customers) await insertRequest(database.db, { customerUuid: cust, status: 'submitted' });
  const late = [lateServerSpan('POST a'), lateServerSpan('POST b')];
  exporter.reset();
  await cut();
  await t.rejects(recordResults(database.db, [result(customers[0]!, late[0]!.origin), result(customers[1]!, late[1]!.origin)], { skewS: 300 }));
  t.same(exporter.getFinishedSpans(), [], 'nothing yet: no late span begins in the statement');
  for (const { origin } of late) origin.begin(null); // the answers (503), as the route's onResponse begins them
  const failed = exporter.getFinishedSpans().filter((s) => s.name === 'record_results');
  t.same(
    failed.map((s) => s.parentSpanContext?.spanId).sort(),
    late.map((l) => l.spanId()).sort(),
    'one failed record_results under each, once begun',
  );
  for (const span of failed) t.equal(span.status.code, 2, 'failed');
});
