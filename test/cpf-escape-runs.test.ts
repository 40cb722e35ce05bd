import t from 'tap';
import { maskCpfsInText } from '../src/cpf.js';
import { maskCpfLike } from '../src/stats/mask.js';

// A stored raw body (up to 64 KB) or any free text may hold a long run of backslashes: an escape
// may be escaped any number of times (\\u0037), so the maskers read `\+` before an escape. Read
// from every backslash of the run, that is quadratic: 10 KB held the event loop for seconds.

const CPF = '52998224725';
const hostile = (n: number) => [`${CPF}${'\\'.repeat(n)}x`, `${CPF}${'\\'.repeat(n)}u00`, `${CPF} ${'\\'.repeat(n)}/`];

for (const [name, mask] of [['maskCpfsInText', maskCpfsInText], ['maskCpfLike', maskCpfLike]] as const) {
  t.test(`${name} reads a 16 KB run of backslashes in linear time`, async (t) => {
    for (const text of hostile(16 * 1024)) {
      const began = performance.now();
      const masked = mask(text);
      const ms = performance.now() - began;
      t.ok(ms < 250, `${Math.round(ms)} ms for ${JSON.stringify(text.slice(11, 14))}…`);
      t.ok(masked.startsWith('***********'), 'the CPF before it is masked');
    }
  });

  t.test(`${name} still masks a CPF escaped once, twice or more`, async (t) => {
    const escaped = (slashes: string) => [...CPF].map((d) => `${slashes}u003${d}`).join('');
    for (const slashes of ['\\', '\\\\', '\\\\\\\\']) {
      const masked = mask(`x ${escaped(slashes)} y`);
      t.notMatch(masked, /u003/, `escaped with ${slashes.length} backslash(es)`);
    }
  });
}
