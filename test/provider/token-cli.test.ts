import t from 'tap';
import { startProcess } from '../helpers/process.js';
import { startTokenServer } from './token-server.js';

const CLI = 'src/provider/token-cli.ts';
const SECRET = 'cli-client-secret-never-printed';

t.test('npm run token says the credentials work and when the token expires, never the token', async (t) => {
  const server = await startTokenServer(t);
  server.lifetimeS = 1800;
  const run = startProcess(t, { NODE_ENV: 'test', AUTH_URL: server.authUrl, CLIENT_ID: 'cli-client', CLIENT_SECRET: SECRET }, CLI);
  const { code } = await run.exited;
  t.equal(code, 0);
  const out = run.stdout.join('\n');
  t.match(out, /^credentials work: http:\/\/127\.0\.0\.1:\d+\/oauth2\/token issued a token \(client cli-client, scope sdk-kyc, HTTP Basic\)/);
  const exp = new Date(JSON.parse(Buffer.from(server.issued[0]!.split('.')[1]!, 'base64url').toString()).exp * 1000);
  t.match(out, `expires at ${exp.toISOString()} (`);
  t.match(out, /\((1799|1800) s from now\)/);
  t.match(out, `renewal at ${new Date(exp.getTime() - 600_000).toISOString()} (exp - 600 s)`);
  const everything = out + run.stderr.join('\n');
  t.notMatch(everything, server.issued[0]!.split('.')[2]!, 'the token is not printed');
  t.notMatch(everything, SECRET);
  t.equal(server.requests.length, 1);
});

t.test('npm run token exits 1 and says why when the credentials are refused', async (t) => {
  const server = await startTokenServer(t);
  server.replies.push({ status: 401, body: { error: 'invalid_client' } });
  const run = startProcess(t, { NODE_ENV: 'test', AUTH_URL: server.authUrl, CLIENT_ID: 'cli-client', CLIENT_SECRET: SECRET }, CLI);
  const { code } = await run.exited;
  t.equal(code, 1);
  t.match(run.stdout.join('\n'), /^credentials do not work: .* answered 401 \(invalid_client\)/);
  t.notMatch(run.stdout.join('\n') + run.stderr.join('\n'), SECRET);
});

t.test('npm run token exits 2 when no token client is configured', async (t) => {
  const run = startProcess(t, { NODE_ENV: 'test' }, CLI);
  const { code } = await run.exited;
  t.equal(code, 2);
  t.match(run.stdout.join('\n'), /no token client configured/);
});
