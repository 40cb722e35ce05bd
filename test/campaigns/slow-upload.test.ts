import t from 'tap';
import { campaignUploader } from '../../src/campaigns/upload.js';
import { UPLOAD_SILENT_MS } from '../../src/campaigns/views.js';
import { keyDigester } from '../../src/requests/key-digest.js';
import { sealerOf } from '../../src/submissions/seal.js';
import { submitBodySchema } from '../../src/submissions/schemas.js';
import { buildTestApp, TEST_CPF_HASH_KEY } from '../helpers/app.js';
import { freshDatabase } from '../helpers/database.js';
import { get, line, ndjson, requestsOf, holdTheProvider } from './fixtures.js';

// An upload is bounded by its silence (30 s without a byte), never by its length; but its campaign
// counted as over (its instance dead) once no batch had touched it for 5 minutes. An upload sending
// a line every few seconds, well within the silence bound, was shown `done` while it still ran, and
// its next batch, finding the campaign no longer running, was refused 409 campaign_cancelled and
// everything it had queued cancelled (a retry with its Idempotency-Key would also have taken it over
// as dead). Found by the campaigns' hostile field test. The upload now touches its campaign as its
// file arrives.

const database = await freshDatabase(t);
let now = Date.now();
const gw = await buildTestApp(t, { database, clock: () => new Date(now) });
await holdTheProvider(database.db);
const { app } = gw;
// The route's uploader on the same clock, given the file as an iterable it pulls chunk by chunk
// (a request's stream would be read ahead of the uploader by its buffers).
const upload = campaignUploader({
  db: database.db,
  clock: () => new Date(now),
  schema: submitBodySchema(false),
  cpfHashKey: TEST_CPF_HASH_KEY,
  keyDigests: keyDigester([TEST_CPF_HASH_KEY]),
  sealer: sealerOf([TEST_CPF_HASH_KEY]),
});

t.test('an upload slower than a batch per 5 minutes, but never silent, runs to its end', async (t) => {
  const minutes = Math.ceil(UPLOAD_SILENT_MS / 60_000) + 3;
  const seen: string[] = [];
  // One line a minute of the clock: the clock moves on when the uploader asks for the next chunk.
  async function* file() {
    for (let minute = 0; minute < minutes; minute++) {
      if (minute > 0) now += 60_000;
      if (minute === minutes - 1) {
        const campaign = await database.db.selectFrom('campaigns').select('public_id').orderBy('id', 'desc').executeTakeFirstOrThrow();
        seen.push((await get(app, `/v1/campaigns/${campaign.public_id}`)).json().status);
      }
      yield ndjson([line(`slow-${minute}`, 200 + minute)]);
    }
  }
  const answer = await upload({ source: 'ndjson', body: file(), createdBy: 'peer:127.0.0.1', traceparent: null, log: app.log, idempotencyKey: 'slow-upload-1' }).catch(
    (err: Error) => err,
  );
  t.same(seen, ['running'], `still running after ${minutes - 1} minutes of the clock without a batch`);
  if (answer instanceof Error) return t.fail(`the upload failed: ${answer.message}`);
  t.equal(answer.accepted, minutes);
  t.same(new Set((await requestsOf(database.db, answer.id)).map((r) => r.status)), new Set(['queued']));
  const view = (await get(app, `/v1/campaigns/${answer.id}`)).json();
  t.equal(view.status, 'running');
  t.equal(view.uploadError, null);
});
