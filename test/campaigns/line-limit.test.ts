import t from 'tap';
import { MAX_LINE_CHARS } from '../../src/campaigns/upload.js';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { CSV, cpfOf, line, upload, holdTheProvider } from './fixtures.js';

// One line may hold 16,384 characters (docs/campaigns.md, Limits). A CSV record's line ending was
// counted as one of them, and an NDJSON line's CR of a CRLF: a line of exactly 16,384 characters
// was rejected as longer, in a CSV whatever its line ending and in NDJSON only with CRLF (found by
// the campaigns' hostile field test).

const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database });
await holdTheProvider(database.db);
const { app } = gw;

/** A valid NDJSON line of exactly `chars` characters (JSON's whitespace as padding). */
function ndjsonOf(customerUuid: string, n: number, chars: number): string {
  const text = JSON.stringify(line(customerUuid, n));
  return `${text.slice(0, -1)}${' '.repeat(chars - text.length)}}`;
}
/** A valid CSV record of exactly `chars` characters (the boolean cell's spaces as padding). */
function csvOf(customerUuid: string, n: number, chars: number): string {
  const start = `${customerUuid},${cpfOf(n)},`;
  return `${start}${' '.repeat(chars - start.length - 4)}true`;
}
const CSV_HEADER = 'customerUuid,cpf,costSavingEnabled';

t.test('an NDJSON line of exactly the limit is read, with LF or CRLF; one character more is rejected', async (t) => {
  for (const [eol, tag] of [['\n', 'lf'], ['\r\n', 'crlf']] as const) {
    const lines = [ndjsonOf(`nd-${tag}-max`, 11 + tag.length, MAX_LINE_CHARS), ndjsonOf(`nd-${tag}-over`, 21 + tag.length, MAX_LINE_CHARS + 1)];
    t.equal(lines[0]!.length, MAX_LINE_CHARS);
    const res = await upload(app, lines.join(eol) + eol);
    t.equal(res.statusCode, 202, res.body);
    t.equal(res.json().accepted, 1, `${tag}: the line of ${MAX_LINE_CHARS} characters is queued`);
    t.same(res.json().rejected.map((r: { line: number }) => r.line), [2], `${tag}: the longer one is rejected`);
  }
});

t.test('a CSV record of exactly the limit is read, with LF or CRLF; one character more is rejected', async (t) => {
  for (const [eol, tag] of [['\n', 'lf'], ['\r\n', 'crlf']] as const) {
    const records = [CSV_HEADER, csvOf(`csv-${tag}-max`, 31 + tag.length, MAX_LINE_CHARS), csvOf(`csv-${tag}-over`, 41 + tag.length, MAX_LINE_CHARS + 1)];
    t.equal(records[1]!.length, MAX_LINE_CHARS);
    const res = await upload(app, records.join(eol) + eol, CSV);
    t.equal(res.statusCode, 202, res.body);
    t.equal(res.json().accepted, 1, `${tag}: the record of ${MAX_LINE_CHARS} characters is queued`);
    t.same(res.json().rejected.map((r: { line: number }) => r.line), [3], `${tag}: the longer one is rejected`);
  }
});
