import querystring from 'node:querystring';
import t from 'tap';
import { redactUrl } from '../src/observability/logger.js';
import { scrubText } from '../src/observability/scrub.js';
import { buildTestApp, TEST_PARTNER_TOKEN } from './helpers/app.js';
import { asciiDigits, DIGIT_ZEROS, inScript } from './helpers/cpf.js';
import { captureLogs } from './helpers/logs.js';

const CPF = '52998224725';
const BEARER = 'eyJhbGciOiJIUzI1NiJ9.secret-bearer-value.sig';

t.test('pino redacts secrets and CPFs at any depth', async (t) => {
  const logs = captureLogs();
  logs.logger.info({ cpf: CPF, body: { cpf: CPF, srd: { nested: { cpf: CPF } } }, partnerToken: TEST_PARTNER_TOKEN }, 'x');
  logs.logger.info({ config: { clientSecret: 'client-secret-value', callbackSecret: 'callback-secret-value' } }, 'y');
  logs.logger.info({ headers: { authorization: `Bearer ${BEARER}`, 'x-partner-auth': TEST_PARTNER_TOKEN } }, 'z');
  const text = logs.text();
  for (const secret of [CPF, TEST_PARTNER_TOKEN, BEARER, 'client-secret-value', 'callback-secret-value']) {
    t.notMatch(text, secret, 'never written');
  }
  t.match(text, /\[redacted\]/);
});

t.test('a logged URL shows no userinfo, no query value and no CPF', async (t) => {
  t.equal(redactUrl('http://gw.example/v1/callbacks/underwriting?token=abc&x=1'), 'http://gw.example/v1/callbacks/underwriting?token=redacted&x=redacted');
  t.equal(redactUrl('http://u:s3cretpass@gw.example/cb?sig=abc#frag'), 'http://gw.example/cb?sig=redacted', 'the userinfo goes (the sandbox logged it)');
  t.equal(redactUrl('http://gw.example/plain'), 'http://gw.example/plain');
});

t.test('request logs carry ids but no header secrets or query tokens', async (t) => {
  const { app, logs } = await buildTestApp(t);
  await app.inject({
    method: 'GET',
    url: '/healthz?token=query-secret-value',
    headers: { authorization: `Bearer ${BEARER}`, 'x-partner-auth': TEST_PARTNER_TOKEN, 'x-request-id': 'req-abc-1' },
  });
  const text = logs.text();
  t.notMatch(text, 'query-secret-value');
  t.notMatch(text, BEARER);
  t.notMatch(text, TEST_PARTNER_TOKEN);
  const completed = logs.entries().find((e) => e.msg === 'request completed');
  t.match(completed, { reqId: 'req-abc-1' }, 'a sane caller request id is kept');
});

t.test("every line a request's logger writes carries its id, and no other line does", async (t) => {
  const { app, logs } = await buildTestApp(t);
  app.get('/log-probe', async (request) => {
    request.log.child({ step: 'inner' }).warn('from a child of the request logger');
    return { ok: true };
  });
  await app.inject({ method: 'GET', url: '/log-probe', headers: { 'x-request-id': 'req-probe-1' } });
  app.log.warn('from the application logger');
  const entries = logs.entries();
  t.match(entries.find((e) => e.msg === 'incoming request'), { reqId: 'req-probe-1' });
  t.match(entries.find((e) => e.msg === 'from a child of the request logger'), { reqId: 'req-probe-1', step: 'inner' });
  t.match(entries.find((e) => e.msg === 'request completed'), { reqId: 'req-probe-1' });
  t.notOk('reqId' in entries.find((e) => e.msg === 'from the application logger')!, 'the application logger has no request');
  t.equal(entries.filter((e) => e.reqId === 'req-probe-1').length, 3);
});

/** Every digit of a text, JSON/percent escapes decoded: whether a CPF survives in any form. */
const digitsOf = (text: string) =>
  text
    .replace(/\\u00?3([0-9])/g, '$1')
    .replace(/%3([0-9])/g, '$1')
    .replace(/\D/g, '');

t.test('a callback secret or a CPF in the query string never reaches a log, whatever its encoding or separator', async (t) => {
  const secret = 'callback-secret-0123456789';
  const cpf = '71428793860';
  const { app, logs } = await buildTestApp(t, { env: { CALLBACK_SECRET: secret } });
  const encodedToken = await app.inject({ method: 'POST', url: `/v1/callbacks/underwriting?%74oken=${secret}`, payload: '{}' });
  t.equal(encodedToken.statusCode, 400, 'an encoded name is still the token: admitted, then the body is refused');
  const semicolon = await app.inject({ method: 'POST', url: `/v1/callbacks/underwriting?x=1;token=${secret}`, payload: '{}' });
  t.equal(semicolon.statusCode, 401);
  for (const query of [`%63pf=${cpf}`, `x=1;cpf=${cpf}`, `cpf%3D${cpf}`, `cpf=714.287.938-60`, `q=%37%31%34%32%38%37%39%33%38%36%30`]) {
    await app.inject({ method: 'GET', url: `/healthz?${query}` });
  }
  await app.inject({ method: 'GET', url: `/v1/underwritings/${cpf}` });
  const text = logs.text();
  t.notMatch(text, secret);
  t.notMatch(digitsOf(text), cpf);
  const urls = logs.entries().flatMap((e) => ((e.req as { url?: string } | undefined)?.url ? [(e.req as { url: string }).url] : []));
  t.ok(urls.includes('/v1/callbacks/underwriting?token'), 'the path and the names of the parameters are logged');
  t.ok(urls.includes('/v1/callbacks/underwriting?…&token'), 'a name the gateway does not take is not shown');
});

t.test('an error is logged with its message scrubbed and without the driver fields that carry values', async (t) => {
  const logs = captureLogs();
  const err = Object.assign(new Error('insert failed for 714 287 938 60'), { code: '23505', detail: 'Key (customer_uuid)=(71428793860) already exists.' });
  logs.logger.error({ err }, 'failed');
  const [entry] = logs.entries();
  t.match(entry, { err: { type: 'Error', code: '23505', message: 'insert failed for [redacted]' } });
  t.notMatch(digitsOf(logs.text()), '71428793860');
});

t.test('an error logged as its message alone ({ err: { message } }) keeps that message, scrubbed', async (t) => {
  const logs = captureLogs();
  logs.logger.warn({ err: { message: (new Error('Query read timeout for 714 287 938 60') as Error).message } }, 'could not announce');
  logs.logger.warn({ err: 'plain text' }, 'a string');
  const [entry, text] = logs.entries();
  t.same(entry!.err, { message: 'Query read timeout for [redacted]' }, 'not "[object Object]"');
  t.same(text!.err, { message: 'plain text' });
});

t.test('the scrubber leaves no 11-digit run in any separator form or escape, and keeps other text', async (t) => {
  for (const form of [
    '71428793860',
    '714.287.938-60',
    '714 287 938 60',
    '714/287/938/60',
    '714_287_938_60',
    '7 1 4 2 8 7 9 3 8 6 0',
    String.raw`\u0037\u0031\u0034\u0032\u0038\u0037\u0039\u0033\u0038\u0036\u0030`,
    '%37%31%34%32%38%37%39%33%38%36%30',
    '&#55;&#49;&#52;&#50;&#56;&#55;&#57;&#51;&#56;&#54;&#48;',
    '７１４２８７９３８６０',
  ]) {
    const scrubbed = scrubText(`{"doc":"${form}","ok":"HTTP 422 at step 3"}`);
    t.match(scrubbed, '"doc":"[redacted]', form);
    t.notMatch(digitsOf(scrubbed), /\d{11}/, form);
    t.match(scrubbed, '"ok":"HTTP 422 at step 3"', 'short numbers stay');
  }
  t.equal(scrubText('token abc here', ['abc']), 'token [redacted] here');
  t.equal(scrubText('x'.repeat(600), [], 500).length, 500);
});

t.test("the scrubber reads another script's digits escaped (JSON, percent-encoded UTF-8, HTML references), and separators escaped", async (t) => {
  const cpf = '71428793860';
  const arabic = [...inScript(cpf, DIGIT_ZEROS.arabicIndic)];
  const forms = {
    json: arabic.map((c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, '0')}`).join(''),
    percent: encodeURIComponent(inScript(cpf, DIGIT_ZEROS.devanagari)),
    decimal: arabic.map((c) => `&#${c.codePointAt(0)};`).join(''),
    // Gujarati 4-9 in hex: no ASCII digit in the whole run.
    hex: [...'44447589885'].map((d) => `&#x${(0xae6 + Number(d)).toString(16)};`).join(''),
  };
  for (const [name, form] of Object.entries(forms)) {
    t.equal(scrubText(`{"doc":"${form}","ok":"HTTP 422 at step 3"}`), '{"doc":"[redacted]","ok":"HTTP 422 at step 3"}', name);
  }
  t.equal(scrubText('caf\\u00e9 &#x2014; %C3%A9 &#8212; at 12:30'), 'caf\\u00e9 &#x2014; %C3%A9 &#8212; at 12:30', 'escapes of what is no digit stay');
  t.equal(scrubText('linha 1\\nlinha 2 &amp; caf&eacute; 12:30'), 'linha 1\\nlinha 2 &amp; caf&eacute; 12:30', 'and so do short escapes and named references among few digits');
  // Separators escaped with letters in them (JSON, percent, HTML hex, a lone surrogate half) are separators, not letters that end a run.
  for (const form of [
    '714\\u002e287\\u002e938\\u002d60',
    '714%2E287%2E938%2D60',
    '714&#x2E;287&#x2E;938&#x2D;60',
    '714%C2%A0287%C2%A0938%C2%A060',
    [...'71428793860'].join('\\udcff'),
    '714%5C287%5C938%5C60',
    '714&#x26;287&#x26;938&#x26;60',
    // JSON's short escapes and HTML's named references between the groups: a line break, a tab, a space.
    '714\\n287\\n938\\n60',
    '714\\t287\\r\\n938/60',
    '714&nbsp;287&period;938&hyphen;60',
    // As written, an escape's own digits are digits too: these show 71428793860 whatever %28 or &#2879; stand for.
    '714%28793860',
    '714&#2879;3860',
  ]) {
    t.equal(scrubText(`{"doc":"${form}","ok":"HTTP 422 at step 3"}`), '{"doc":"[redacted]","ok":"HTTP 422 at step 3"}', form);
  }
  // An escaped digit counts as one digit: six of them (a date, an order number) are no run to redact.
  for (const short of ['/orders/١٢٣٤٥٦?x=1', 'q=date:٢٠٢٤-٠١-٠١']) {
    const url = short.replace(/\p{Nd}+/gu, (digits) => encodeURIComponent(digits));
    t.equal(scrubText(url), url, `${url}: fewer than 11 digits stay`);
  }
});

t.test('the scrubber reads text percent-encoded again, JavaScript code point escapes and HTML references without their ;', async (t) => {
  const cpf = '71428793860';
  const arabic = [...inScript(cpf, DIGIT_ZEROS.arabicIndic)].map((c) => c.codePointAt(0)!);
  for (const form of [
    // Encoded twice or three times: the separators (%252E), the digits (%2537), another script's UTF-8 (%25D9%25A5).
    '714%252E287%252E938%252D60',
    '714%25252E287%25252E938%25252D60',
    [...cpf].map((d) => `%253${d}`).join(''),
    encodeURIComponent(encodeURIComponent(inScript(cpf, DIGIT_ZEROS.devanagari))),
    // JavaScript's \u{...}: ASCII digits, another script's, with leading zeros.
    [...cpf].map((d) => `\\u{3${d}}`).join(''),
    arabic.map((c) => `\\u{${c.toString(16)}}`).join(''),
    arabic.map((c) => `\\u{000${c.toString(16)}}`).join('.'),
    // HTML references without their ';', as HTML reads them: hexadecimal ASCII digits, another script's digits.
    [...cpf].map((d) => `&#x3${d}`).join(''),
    arabic.map((c) => `&#${c}`).join(' '),
    arabic.map((c) => `&#x${c.toString(16)}`).join('-'),
    // Encoded four or five times (a URL carried through as many systems), Python's \U, JavaScript's
    // escape() (%u0665, an astral digit as two %u halves), code point escapes of surrogate halves.
    '714%2525252E287%2525252E938%2525252D60',
    [...cpf].map((d) => `%2525253${d}`).join(''),
    [1, 2, 3, 4, 5].reduce((text) => encodeURIComponent(text), inScript(cpf, DIGIT_ZEROS.devanagari)),
    arabic.map((c) => `\\U${c.toString(16).padStart(8, '0')}`).join(''),
    [...inScript(cpf, 0x1d7ce)].map((c) => `\\U${c.codePointAt(0)!.toString(16).padStart(8, '0')}`).join(''),
    escape(inScript(cpf, DIGIT_ZEROS.arabicIndic)),
    escape(inScript('714.287.938-60', 0x1d7ce)),
    [...inScript(cpf, 0x1d7ce)].map((c) => `\\u{${c.charCodeAt(0).toString(16)}}\\u{${c.charCodeAt(1).toString(16)}}`).join(''),
    [...inScript(cpf, 0x1d7ce)].map((c) => `\\u{${c.charCodeAt(0).toString(16)}}\\u${c.charCodeAt(1).toString(16)}`).join(''),
    [...inScript(cpf, 0x1d7ce)].map((c) => `\\u${c.charCodeAt(0).toString(16)}\\u{${c.charCodeAt(1).toString(16)}}`).join(''),
    // escape() then percent-encoded (a query string that carries its output), once and twice.
    encodeURIComponent(escape(inScript(cpf, DIGIT_ZEROS.arabicIndic))),
    encodeURIComponent(encodeURIComponent([...cpf].map((d) => `%u003${d}`).join(''))),
    encodeURIComponent(escape(inScript(cpf, 0x1d7ce))),
  ]) {
    t.equal(scrubText(`{"doc":"${form}","ok":"HTTP 422 at step 3"}`), '{"doc":"[redacted]","ok":"HTTP 422 at step 3"}', form);
  }
  // A `%` encoded once, then the digits: `%25` followed by two digits is no byte encoded twice there.
  t.equal(scrubText(`{"doc":"${encodeURIComponent('%123/456/789/09')}","ok":"HTTP 422 at step 3"}`), '{"doc":"%25[redacted]","ok":"HTTP 422 at step 3"}', 'a percent sign encoded once, then a CPF');
  t.equal(scrubText('100%25 of 12:30 &#x2014 \\u{e9}'), '100%25 of 12:30 &#x2014 \\u{e9}', 'escapes of what is no digit stay');
  t.equal(scrubText('50%u0025 \\U0001F600 \\u{d83d}\\u{de00} %25252525 at 12:30'), '50%u0025 \\U0001F600 \\u{d83d}\\u{de00} %25252525 at 12:30', 'nor those of the forms read by name');
});

t.test('the scrubber reads digits apart by any number of separators, and the digits of any script', async (t) => {
  // Up to three separators were read between two digits: four let the CPF through.
  for (const form of [
    '714....287....938....60',
    '714 - - 287 - - 938 - - 60',
    `714${' '.repeat(40)}287/////938______60`,
    '7-.-1-.-4-.-2-.-8-.-7-.-9-.-3-.-8-.-6-.-0',
    String.raw`\u0037\u0031\u0034 ; ; \u0032\u0038\u0037 ; ; \u0039\u0033\u0038 ; ; \u0036\u0030`,
    String.raw`\uff17\uff11\uff14.\uff12\uff18\uff17.\uff19\uff13\uff18-\uff16\uff10`,
    ...Object.values(DIGIT_ZEROS).flatMap((zero) => [inScript('71428793860', zero), inScript('714.287.938-60', zero), inScript('714 . . . 287 . . . 938 - - - 60', zero)]),
    `714.${inScript('287', DIGIT_ZEROS.arabicIndic)}.${inScript('938', DIGIT_ZEROS.devanagari)}-60`,
  ]) {
    const scrubbed = scrubText(`{"doc":"${form}","ok":"HTTP 422 at step 3"}`);
    t.equal(scrubbed, '{"doc":"[redacted]","ok":"HTTP 422 at step 3"}', form);
    t.notMatch(digitsOf(asciiDigits(scrubbed)), /\d{11}/, form);
  }
  t.equal(scrubText('step 3 of 5, 2 left'), 'step 3 of 5, 2 left', 'a few numbers apart stay');
  t.equal(scrubText(inScript('tel 1234-5678', DIGIT_ZEROS.arabicIndic)), inScript('tel 1234-5678', DIGIT_ZEROS.arabicIndic), 'and short ones of any script');
});

t.test('a configured secret or a CPF typed into a path is neither logged by npm start nor echoed by its 404', async (t) => {
  const { startGatewayProcess } = await import('./helpers/gateway-process.js');
  const callbackSecret = 'cbsecret-path-0123456789';
  const queryKey = 'querykey-path-0123456789';
  const { server, base } = await startGatewayProcess(t, { CALLBACK_SECRET: callbackSecret, QUERY_API_KEYS: queryKey, LOG_LEVEL: 'info' });
  for (const path of [`/v1/nothing/${callbackSecret}`, `/v1/underwritings/${queryKey}/x`, '/v1/nothing/529.982.247-25', '/v1/nothing/529%2E982%2E247%2D25']) {
    const answer = await fetch(`${base}${path}`);
    t.equal(answer.status, 404, path);
    const body = await answer.text();
    t.match(body, /"error":"not_found"/);
    t.notOk([callbackSecret, queryKey, '529.982.247-25', '529%2E982%2E247%2D25'].some((s) => body.includes(s)), `the 404 for ${path} echoes no secret or CPF`);
    t.match(body, /no route GET \/v1\//, 'it still names the route asked for');
  }
  // Lines arrive in order: once the last request's line is in, every earlier one is.
  const last = server.waitForLog((e) => e.msg === 'request completed' && e.res?.statusCode === 404 && e.reqId === 'last-request');
  t.equal((await fetch(`${base}/v1/last`, { headers: { 'x-request-id': 'last-request' } })).status, 404);
  await last;
  t.ok(server.stdout.some((line) => line.includes('"url":"/v1/nothing/[redacted]"')), 'the requests were logged, their paths scrubbed');
  const text = server.stdout.join('\n');
  for (const secret of [callbackSecret, queryKey, '52998224725', '529.982.247-25']) t.notOk(text.includes(secret), `${secret} is in no log line`);
});

t.test('a CPF typed into a path with four or more separators, or in the digits of another script, reaches no log line and no 404', async (t) => {
  const { app, logs } = await buildTestApp(t);
  const paths = [
    '/v1/nothing/529....982....247....25',
    '/v1/nothing/529%20-%20-%20982%20-%20-%20247%20-%20-%2025',
    '/v1/nothing/529%2E%2E%2E%2E982%2E%2E%2E%2E247%2D%2D%2D%2D25',
    `/v1/nothing/${encodeURIComponent(inScript('529.982.247-25', DIGIT_ZEROS.arabicIndic))}`,
    `/v1/nothing/${encodeURIComponent(inScript('52998224725', DIGIT_ZEROS.devanagari))}`,
    `/v1/nothing/${encodeURIComponent(inScript('529 982 247 25', DIGIT_ZEROS.mathematicalBold))}`,
    '/v1/underwritings/cust-529-_-_982-_-_247-_-_25',
  ];
  for (const url of paths) {
    const res = await app.inject({ method: 'GET', url });
    t.equal(res.statusCode, 404, url);
    t.notMatch(digitsOf(asciiDigits(querystring.unescape(res.body))), '52998224725', `the 404 for ${url} does not echo the CPF`);
  }
  const urls = logs.entries().flatMap((e) => ((e.req as { url?: string } | undefined)?.url ? [(e.req as { url: string }).url] : []));
  t.same(urls.filter((u) => u.startsWith('/v1/nothing/')), paths.slice(0, -1).map(() => '/v1/nothing/[redacted]'), 'each path logged, its CPF redacted');
  t.ok(urls.includes('/v1/underwritings/cust-[redacted]'));
  const text = logs.text();
  for (const read of [text, querystring.unescape(text), querystring.unescape(querystring.unescape(text))]) {
    t.notMatch(digitsOf(asciiDigits(read)), '52998224725', 'no log line holds the CPF, in any encoding or script');
  }
});
