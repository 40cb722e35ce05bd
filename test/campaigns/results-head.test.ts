import Fastify from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import t, { type Test } from 'tap';
import { campaignRoutes } from '../../src/campaigns/routes.js';
import type { CampaignService } from '../../src/campaigns/service.js';
import { testConfig } from '../helpers/app.js';

// HEAD /v1/campaigns/:id/results (Fastify's HEAD of every GET) answered at once, then drained the
// stream it did not send: every page of the campaign's results read from the database and
// formatted, as fast as the database gave them, for nobody; a million-row campaign's worth of
// work per HEAD (found by the campaigns' hostile field test: 5 HEADs of a 100,000-row campaign
// took 2.5 s of the gateway's CPU). The route is driven here with a service that counts the pages
// taken from it.

const ID = `cmp_${'a'.repeat(32)}`;

async function appCountingPages(t: Test) {
  const taken = { pages: 0 };
  const service = {
    async results(_id: string, ndjson: boolean) {
      async function* file() {
        for (let page = 0; page < 3; page++) {
          taken.pages++;
          yield ndjson ? '{}\n' : 'a,b\r\n';
        }
      }
      return { name: `${ID}-results.csv`, file: file() };
    },
  } as unknown as CampaignService;
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(campaignRoutes(testConfig(), service));
  t.teardown(() => app.close());
  return { app, taken };
}

t.test('HEAD of the results answers their headers and reads no page', async (t) => {
  const { app, taken } = await appCountingPages(t);
  const res = await app.inject({ method: 'HEAD', url: `/v1/campaigns/${ID}/results` });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^text\/csv/);
  t.match(res.headers['content-disposition'], `${ID}-results.csv`);
  t.equal(res.body, '');
  t.equal(taken.pages, 0, 'no page read for a HEAD');
});

t.test('GET of the results still streams every page', async (t) => {
  const { app, taken } = await appCountingPages(t);
  const res = await app.inject({ method: 'GET', url: `/v1/campaigns/${ID}/results` });
  t.equal(res.statusCode, 200);
  t.equal(res.body, 'a,b\r\n'.repeat(3));
  t.equal(taken.pages, 3);
});
