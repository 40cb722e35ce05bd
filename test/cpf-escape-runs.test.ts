import t from 'tap';
import { maskCpfsInText } from '../src/cpf.js';
import { scrubText } from '../src/observability/scrub.js';
import { maskCpfLike, redactCpfLike } from '../src/stats/mask.js';

// A stored raw body (up to 64 KB) or any free text may hold a long run of backslashes: an escape
// may be escaped any number of times (\\u0037), so the maskers read `\+` before an escape. Read
// from every backslash of the run, that is quadratic: 10 KB held the event loop for seconds.

const CPF = '52998224725';
const hostile = (n: number) => [`${CPF}${'\\'.repeat(n)}x`, `${CPF}${'\\'.repeat(n)}u00`, `${CPF} ${'\\'.repeat(n)}/`];

for (const [name, mask] of [['maskCpfsInText', maskCpfsInText], ['maskCpfLike', maskCpfLike]] as const) {
  t.test(`${name} reads a 16 KB run of backslashes in linear time`, async (t) => {
    const [small, large] = [hostile(2 * 1024), hostile(16 * 1024)];
    for (const [i, text] of large.entries()) {
      t.ok(mask(text).startsWith('***********'), 'the CPF before it is masked');
      // A ratio, not a wall-clock bound (a CI host running both suites once took 849 ms for what
      // takes 49 alone): 8 times the run, about 8 times the time; read from every backslash, 64.
      let ratio = timeRatio(mask, small[i]!, text);
      for (let again = 0; again < 2 && ratio >= 32; again++) ratio = Math.min(ratio, timeRatio(mask, small[i]!, text));
      t.ok(ratio < 32, `${JSON.stringify(text.slice(11, 14))}…: 8 times the run took ${ratio.toFixed(1)} times as long`);
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

// The maskers read any number of separators between two digits: a run that falls short of 11
// digits is given back before the next is tried. Read more than once (a gap that could also begin a
// digit: %35, \u0035, &#53;), that costs more than linear time in what a caller sends: a request's
// path, a stored raw body.

/** Hostile texts of about n characters, each a way of making many runs fall short after long reads. */
const HOSTILE: Record<string, (n: number) => string> = {
  'digits and separators alternating': (n) => '5.'.repeat(n / 2),
  'ten digits apart by long runs of separators, then a letter': (n) => `${`5${'.'.repeat(n / 100)}`.repeat(10)}x`.repeat(10),
  'groups of three apart by long runs of separators': (n) => `${`529${' - '.repeat(n / 300)}`.repeat(3)}x`.repeat(10),
  'Arabic-Indic digits apart by long runs of separators': (n) => `${`\u0665${'.'.repeat(n / 100)}`.repeat(10)}x`.repeat(10),
  'a run of percent signs': (n) => '%'.repeat(n),
  'a run of %3': (n) => `${'%3'.repeat(n / 2)}x`,
  'percent-escaped digits apart by escaped separators': (n) => `${`%35${'%2E'.repeat(n / 150)}`.repeat(5)}x`.repeat(10),
  'digits apart by long runs of backslashes': (n) => `${`5${'\\'.repeat(n / 10)}`.repeat(10)}x`,
  'JSON-escaped digits apart by backslashes': (n) => `${`\\u0035${'\\'.repeat(n / 100)}`.repeat(10)}x`.repeat(10),
  'digits apart by escaped slashes': (n) => `${`529${'\\/'.repeat(n / 20)}`.repeat(10)}x`,
  'HTML references apart by spaces': (n) => `${`&#53;${' '.repeat(n / 60)}`.repeat(5)}x`.repeat(10),
  'HTML references of separators': (n) => `${`&#53;${'&#46;'.repeat(n / 50)}`.repeat(10)}x`,
  '&# then zeros': (n) => `&#${'0'.repeat(n)}`,
  'a run of &#x': (n) => '&#x'.repeat(n / 3),
  'ten digits, a letter, again and again': (n) => '1 2 3 4 5 6 7 8 9 0x'.repeat(n / 20),
  'a run of \\u{': (n) => '\\u{'.repeat(n / 3),
  'code point escapes of digits apart by spaces': (n) => `${`\\u{35}${' '.repeat(n / 60)}`.repeat(5)}x`.repeat(10),
  'references without their ; apart by spaces': (n) => `${`&#x35${' '.repeat(n / 60)}`.repeat(5)}x`.repeat(10),
  'a run of %25': (n) => `${'%25'.repeat(n / 3)}x`,
  'digits percent-encoded twice apart by separators encoded twice': (n) => `${`%2535${'%252E'.repeat(n / 250)}`.repeat(5)}x`.repeat(10),
  'one % encoded again and again': (n) => `%${'25'.repeat(n / 2)}x`,
  "one % encoded again and again, then escape()'s u0665": (n) => `%${'25'.repeat(n / 2)}u0665`,
  "runs of %25 each ending in escape()'s u0665": (n) => `%${'25'.repeat(n / 200)}u0665 `.repeat(100),
  'digits encoded four times apart by long runs of %25': (n) => `${`%25252535${'%25'.repeat(n / 150)}`.repeat(5)}x`.repeat(10),
  'a run of %u': (n) => '%u'.repeat(n / 2),
  "escape()'s digits apart by spaces": (n) => `${`%u0665${' '.repeat(n / 60)}`.repeat(5)}x`.repeat(10),
  'a run of \\U0000': (n) => '\\U0000'.repeat(n / 6),
  'code point escapes of high halves': (n) => '\\u{d835}'.repeat(n / 8),
  "escape()'s high halves": (n) => '%uD835'.repeat(n / 6),
  'escape() encoded again, apart by spaces': (n) => `${`%25u0665${' '.repeat(n / 60)}`.repeat(5)}x`.repeat(10),
};

/**
 * How many times longer f takes on large than on small: the least time of many short rounds of
 * each, interleaved, so that a round the machine's other work slowed (it is shared) is not the one
 * counted. A round is enough calls to last a fraction of a millisecond on the small text.
 *
 * Time is the process's CPU time, not the clock's: on a loaded host (CI runs two suites and a
 * container build on 2 cores) a round is often taken off the CPU, and a round of the large text,
 * 8 times longer, far more often than one of the small: the least of 15 clock readings still
 * counted such waits, and CI once read 53 times for a linear cost (maskCpfLike, digits and
 * separators alternating; scrubText read 8.5 on that shape in the same run).
 */
function timeRatio(f: (text: string) => string, small: string, large: string): number {
  const cpuMs = (since?: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(since);
    return (used.user + used.system) / 1000;
  };
  const once = process.cpuUsage();
  f(small);
  const calls = Math.max(1, Math.ceil(0.3 / Math.max(cpuMs(once), 0.001)));
  const round = (text: string) => {
    const began = process.cpuUsage();
    for (let i = 0; i < calls; i++) f(text);
    return cpuMs(began);
  };
  let [bestSmall, bestLarge] = [Infinity, Infinity];
  for (let i = 0; i < 15; i++) {
    bestSmall = Math.min(bestSmall, round(small));
    bestLarge = Math.min(bestLarge, round(large));
  }
  return bestLarge / bestSmall;
}

const SMALL = 12_500;
const LARGE = 8 * SMALL; // 100 kB
for (const [name, mask] of [
  ['scrubText', (text: string) => scrubText(text)],
  ['maskCpfsInText', maskCpfsInText],
  ['maskCpfLike', maskCpfLike],
  ['redactCpfLike', (text: string) => redactCpfLike(text, '[redacted]')],
] as const) {
  t.test(`${name} reads hostile text in time linear in its length`, async (t) => {
    for (const [shape, make] of Object.entries(HOSTILE)) {
      const [small, large] = [make(SMALL), make(LARGE)];
      mask(small); // compiled and warm before it is timed
      // Linear: 8 times the text, about 8 times the time; quadratic: 64. A busy machine may
      // still spoil one measure: it is taken again before the test fails, a quadratic cost never passes.
      let ratio = timeRatio(mask, small, large);
      for (let again = 0; again < 2 && ratio >= 32; again++) ratio = Math.min(ratio, timeRatio(mask, small, large));
      t.ok(ratio < 32, `${shape}: 8 times the text took ${ratio.toFixed(1)} times as long`);
    }
  });
}
