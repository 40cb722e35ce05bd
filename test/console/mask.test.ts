import t from 'tap';
import { maskCpfLike } from '../../src/console/ui/mask.js';

// The console masks CPF-like digit runs wherever it shows a stored body.

t.test('eleven digits are masked in any separator form', async (t) => {
  for (const cpf of ['52998224725', '529.982.247-25', '529 982 247 25', '529-982-247/25', '529.982.247 - 25']) {
    const masked = maskCpfLike(`{"cpf":"${cpf}"}`);
    t.notMatch(masked, /\d/, `${cpf} leaves no digit`);
    t.equal(masked.length, `{"cpf":"${cpf}"}`.length, 'its shape stays');
  }
});

t.test('a longer digit run is masked too; shorter numbers, dates and times stay', async (t) => {
  t.equal(maskCpfLike('id 1234567890123'), 'id •••••••••••••');
  const body = '{"started":"2026-01-01T00:00:01.000Z","response":{"score":710,"riskBand":2,"limit":5000}}';
  t.equal(maskCpfLike(body), body);
  t.equal(maskCpfLike('phone 1234-5678, ten 0123456789'), 'phone 1234-5678, ten 0123456789');
});

t.test('fullwidth digits and separators are masked like ASCII ones', async (t) => {
  t.equal(maskCpfLike('cpf ５２９．９８２．２４７－２５ ok'), 'cpf •••．•••．•••－•• ok');
  t.equal(maskCpfLike('５２９９８２２４７２５'), '•••••••••••');
  t.equal(maskCpfLike('529９８２２４７２５'), '•••••••••••', 'both widths in one run');
});

t.test('every CPF in a text is masked', async (t) => {
  t.equal(maskCpfLike('a 52998224725 b 111.444.777-35 c'), 'a ••••••••••• b •••.•••.•••-•• c');
});

t.test('any number of separators, and any script\'s digits, as the gateway\'s views read them', async (t) => {
  t.equal(maskCpfLike('cpf 529....982....247....25 ok'), 'cpf •••....•••....•••....•• ok');
  t.equal(maskCpfLike('cpf 529 - - 982 - - 247 - - 25'), 'cpf ••• - - ••• - - ••• - - ••');
  t.equal(maskCpfLike('cpf ٥٢٩٩٨٢٢٤٧٢٥ ok'), 'cpf ••••••••••• ok', 'Arabic-Indic');
  t.equal(maskCpfLike('cpf ५२९.९८२.२४७-२५'), 'cpf •••.•••.•••-••', 'Devanagari');
  const long = `${'1 '.repeat(20000)}x`;
  t.equal(maskCpfLike(long), `${'• '.repeat(20000)}x`, 'a long run in linear time');
});
