import t from 'tap';
import { rawBodyView } from '../../src/stats/callbacks.js';

// GET /v1/callbacks serves an invalid or unmatched callback's raw bytes, masked: a CPF written with
// escapes (JSON, percent, HTML) is still a CPF, and the page's reader decodes it at a glance.

const view = (text: string) => rawBodyView(Buffer.from(text, 'utf8'));
const json = (cpf: string) => `\\u${cpf.split('').map((d) => d.charCodeAt(0).toString(16).padStart(4, '0')).join('\\u')}`;

t.test('a JSON-escaped CPF (the customerUuid docs/personal-data.md says is served masked) leaves no digit', async (t) => {
  const body = `{"customerUuid":"${json('98765432100')}","started":"2026-11-27T12:50:09.000Z"}`;
  const shown = view(body);
  t.notMatch(shown, /\\u003[0-9]/, 'no escaped digit left');
  t.match(shown, /"started":"2026-11-27T12:50:09.000Z"/, 'the rest as sent');
});

t.test('other escapes, and escaped separators', async (t) => {
  const cases: Array<[string, string]> = [
    ['%35%32%39%39%38%32%32%34%37%32%35', '***********'],
    ['&#53;&#50;&#57;&#57;&#56;&#50;&#50;&#52;&#55;&#50;&#53;', '***********'],
    ['529\\u002e982\\u002e247\\u002d25', '***\\u002e***\\u002e***\\u002d**'],
    ['\\uff15\\uff12\\uff19\\uff19\\uff18\\uff12\\uff12\\uff14\\uff17\\uff12\\uff15', '***********'],
    ['529%2E982%2E247%2D25', '***%2E***%2E***%2D**'],
    ['529\\/982\\/247\\/25', '***\\/***\\/***\\/**'],
    ['%EF%BC%95%EF%BC%92%EF%BC%99%EF%BC%99%EF%BC%98%EF%BC%92%EF%BC%92%EF%BC%94%EF%BC%97%EF%BC%92%EF%BC%95', '***********'],
  ];
  for (const [cpf, masked] of cases) t.equal(view(`{"note":"${cpf}"}`), `{"note":"${masked}"}`, cpf);
});

t.test('what was masked before still is, what was kept still is', async (t) => {
  t.equal(view('{"cpf":"529.982.247-25"}'), '{"cpf":"***.***.***-**"}');
  const body = '{"started":"2026-01-01T00:00:01.000Z","response":{"score":710,"riskBand":2,"limit":5000}}';
  t.equal(view(body), body);
});
