import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { FIRST_RETRY_S, MAX_GAP_S, retryDelayS } from '../../src/events/backoff.js';
import { webhookSigner } from '../../src/events/signature.js';
import { redactUrl } from '../../src/observability/logger.js';
import { scrubTarget } from '../../src/events/targets.js';
import { configuredTarget, webhookSecret } from './fixtures.js';

t.test('what the signer produces, the standardwebhooks package verifies; a changed byte does not', async (t) => {
  const secret = webhookSecret();
  const body = JSON.stringify({ id: 'evt_0123', type: 'underwriting.completed', timestamp: new Date().toISOString(), data: { é: '✓' } });
  const headers = webhookSigner(secret).headers('evt_0123', Math.floor(Date.now() / 1000), body);
  t.same(new Webhook(secret).verify(body, headers), JSON.parse(body));
  t.throws(() => new Webhook(secret).verify(body.replace('✓', 'x'), headers));
  const old = webhookSigner(secret).headers('evt_0123', Math.floor(Date.now() / 1000) - 3600, body);
  t.throws(() => new Webhook(secret).verify(body, old), 'a stale timestamp is refused by the verifier: each attempt signs anew');
});

t.test('retries: the first within seconds, each gap doubling with jitter, never above 10 minutes', async (t) => {
  t.ok(retryDelayS(1, () => 0) >= FIRST_RETRY_S / 2 && retryDelayS(1, () => 1) <= FIRST_RETRY_S);
  t.equal(retryDelayS(2, () => 1), 2);
  t.equal(retryDelayS(3, () => 0), 2);
  t.equal(retryDelayS(40, () => 1), MAX_GAP_S);
  t.equal(MAX_GAP_S, 600);
  const gaps = Array.from({ length: 200 }, () => retryDelayS(5));
  t.ok(new Set(gaps).size > 100, 'jittered');
});

t.test('a URL is shown without userinfo and query values, and its secrets are scrubbed from any text', async (t) => {
  t.equal(redactUrl('https://u:p@x.example:8443/in?token=abc&a=1&a=2#frag'), 'https://x.example:8443/in?token=redacted&a=redacted');
  t.equal(redactUrl('http://x.example/in'), 'http://x.example/in');
  const target = configuredTarget('https://hook%40user:pa%3Ass@x.example/in?token=s3cr3tvalue');
  t.equal(target.url, 'https://x.example/in?token=s3cr3tvalue');
  t.equal(target.authorization, `Basic ${Buffer.from('hook@user:pa:ss').toString('base64')}`);
  const scrubbed = scrubTarget('failed https://x.example/in?token=s3cr3tvalue as hook@user pa:ss', target);
  t.notMatch(scrubbed, /s3cr3tvalue|hook@user|pa:ss/);
  t.not(configuredTarget('http://x.example/a?k=1').key, configuredTarget('http://x.example/a?k=2').key, 'one key per configured URL');
});
