import t from 'tap';
import { buildTestApp } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { get, line, ndjson, requestsOf, upload, holdTheProvider } from './fixtures.js';

// A rejected line's issues name an unknown field as the client wrote it, and are stored with the
// campaign (jsonb). A field name holding NUL or a surrogate that pairs with nothing (\ud800), or one
// whose cut at 200 characters fell inside a surrogate pair (an emoji), made PostgreSQL refuse the
// campaign's row: 500, and the whole upload cancelled, its valid lines with it (found by the
// campaigns' hostile field test).

const database = await freshDatabase(t);
const gw = await buildTestApp(t, { database });
await holdTheProvider(database.db);
const { app } = gw;

const names = {
  nul: 'a\u0000b',
  'lone surrogate': 'a\ud800b',
  'emoji cut at the issue text limit': `${'x'.repeat(199)}\u{1F600}`,
};

for (const [what, name] of Object.entries(names)) {
  t.test(`an unknown field named with ${what}: the line is rejected, the file's valid lines queued`, async (t) => {
    const slug = what.replace(/\W+/g, '-');
    const res = await upload(app, ndjson([line(`ok-${slug}`, 41), { ...line(`bad-${slug}`, 42), [name]: 1 }]));
    t.equal(res.statusCode, 202, res.body);
    t.equal(res.json().accepted, 1);
    t.same(res.json().rejected.map((r: { line: number }) => r.line), [2]);
    t.equal(res.json().rejected[0].issues[0].message, 'unknown field');
    const view = await get(app, `/v1/campaigns/${res.json().id}`);
    t.equal(view.statusCode, 200);
    t.same(view.json().rejected, res.json().rejected, 'kept with the campaign as answered');
    t.equal(view.json().uploadError, null);
    t.same((await requestsOf(database.db, res.json().id)).map((r) => r.status), ['queued']);
  });
}
