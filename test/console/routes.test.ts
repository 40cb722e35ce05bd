import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import t from 'tap';
import { CONSOLE_CSP, consoleRoutes } from '../../src/console/routes.js';
import { installErrorHandler } from '../../src/http/errors.js';
import { buildTestApp } from '../helpers/app.js';
import { ensureConsoleBuilt } from '../helpers/browser.js';

await ensureConsoleBuilt();

t.test('GET /console serves the page under a policy that allows only the gateway itself', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ method: 'GET', url: '/console' });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^text\/html/);
  t.equal(res.headers['content-security-policy'], CONSOLE_CSP);
  t.notMatch(CONSOLE_CSP, /unsafe|https?:|\*|data:/, 'no inline code, no other origin');
  t.match(CONSOLE_CSP, /default-src 'self'/);
  t.match(CONSOLE_CSP, /frame-ancestors 'none'/);
  t.equal(res.headers['cache-control'], 'no-cache');
  t.notMatch(res.body, /<script>|<style>|\sstyle=|\son[a-z]+=/i, 'nothing inline in the page');

  const [, script] = /src="console\/([^"]+\.js)"/.exec(res.body) ?? [];
  const [, sheet] = /href="console\/([^"]+\.css)"/.exec(res.body) ?? [];
  const js = await app.inject({ method: 'GET', url: `/console/${script}` });
  t.equal(js.statusCode, 200);
  t.match(js.headers['content-type'], /^text\/javascript/);
  t.match(js.headers['cache-control'], /immutable/, 'a hashed name may be cached for good');
  t.notMatch(js.body, /https?:\/\/(?!www\.w3\.org)[a-z]/i, 'the bundle names no outside address');
  const css = await app.inject({ method: 'GET', url: `/console/${sheet}` });
  t.equal(css.statusCode, 200);
  t.match(css.headers['content-type'], /^text\/css/);
  t.notMatch(css.body, /@import|url\(\s*["']?https?:/i, 'no outside fonts or sheets');
  t.equal((await app.inject({ method: 'GET', url: '/console/favicon.svg' })).statusCode, 200);
});

t.test('the API routes keep their own, stricter policy', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ method: 'GET', url: '/v1/underwritings' });
  t.equal(res.headers['content-security-policy'], "default-src 'none';frame-ancestors 'none'");
});

t.test('the console is behind the query allowlist, and the page itself needs no key', async (t) => {
  const { app } = await buildTestApp(t, { env: { QUERY_ALLOWED_IPS: '10.1.0.0/16', QUERY_API_KEYS: 'a-key-of-sixteen-characters' } });
  const outside = await app.inject({ method: 'GET', url: '/console', remoteAddress: '10.2.0.1' });
  t.equal(outside.statusCode, 403);
  t.equal(outside.json().error, 'forbidden');
  const asset = await app.inject({ method: 'GET', url: '/console/favicon.svg', remoteAddress: '10.2.0.1' });
  t.equal(asset.statusCode, 403, 'its files too');
  const inside = await app.inject({ method: 'GET', url: '/console', remoteAddress: '10.1.2.3' });
  t.equal(inside.statusCode, 200, 'no key asked for the page; its API calls carry it');
  const api = await app.inject({ method: 'GET', url: '/v1/underwritings', remoteAddress: '10.1.2.3' });
  t.equal(api.statusCode, 401);
});

t.test('unknown files are 404, and /console/ leads to /console', async (t) => {
  const { app } = await buildTestApp(t);
  const missing = await app.inject({ method: 'GET', url: '/console/nothing.js' });
  t.equal(missing.statusCode, 404);
  t.equal(missing.json().error, 'not_found');
  t.equal((await app.inject({ method: 'GET', url: '/console/..%2Fpackage.json' })).statusCode, 400);
  t.equal((await app.inject({ method: 'GET', url: '/console/index.html' })).statusCode, 404, 'the page has one address');
  const slash = await app.inject({ method: 'GET', url: '/console/' });
  t.equal(slash.statusCode, 308);
  t.equal(slash.headers.location, '../console');
});

t.test('a gateway whose console was not built says so (503) and serves it once it is', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ugw-console-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  installErrorHandler(app);
  await app.register(consoleRoutes({ config: { queryAllowedIps: ['127.0.0.1/32'] }, assetsDir: dir }));
  t.teardown(() => app.close());
  const res = await app.inject({ method: 'GET', url: '/console' });
  t.equal(res.statusCode, 503);
  t.same(res.json(), { error: 'console_not_built', message: 'the console is not built; run npm run build' });
  const { buildConsole } = await import('../../src/console/build.js');
  await buildConsole(dir);
  t.equal((await app.inject({ method: 'GET', url: '/console' })).statusCode, 200, 'no restart needed');
});
