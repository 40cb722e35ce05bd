import path from 'node:path';
import t from 'tap';
import { ROOT, rootUrl } from './helpers/root.js';

interface Arguments {
  compiledArguments: (args: string[], options: { root: string; out: string; takesValue: Set<string>; cwd?: string }) => string[];
  optionsTakingValue: (definitions: Record<string, { type: string; short?: string }>) => Set<string>;
}
const { compiledArguments, optionsTakingValue } = (await import(rootUrl('scripts/test-arguments.mjs').href)) as Arguments;
const { TapConfig } = (await import('@tapjs/config')) as unknown as {
  TapConfig: { load(): Promise<{ jack: { toJSON(): Record<string, { type: string; short?: string }> } }> };
};

const takesValue = optionsTakingValue((await TapConfig.load()).jack.toJSON());
const out = path.join(ROOT, '.tap-build');
const compiled = (...args: string[]): string[] => compiledArguments(args, { root: ROOT, out, takesValue, cwd: ROOT });

t.test("tap's options that take a value are read from tap's own definitions", async (t) => {
  for (const option of ['--grep', '-g', '--jobs', '-j', '--reporter', '-R', '--timeout', '-t', '--output-dir', '-d', '--before', '--test-env']) {
    t.ok(takesValue.has(option), option);
  }
  for (const flag of ['--bail', '-b', '--invert', '-i', '--disable-coverage', '--only', '-O']) t.notOk(takesValue.has(flag), flag);
});

t.test('npm test maps test files and folders to their compiled place, never an option value', async (t) => {
  t.same(compiled('test/test-notice.test.ts'), [path.join('.tap-build', 'test', 'test-notice.test.js')], 'a file');
  t.same(compiled('test/events'), [path.join('.tap-build', 'test', 'events')], 'a folder');
  t.same(compiled('--grep', 'test', 'test/events'), ['--grep', 'test', path.join('.tap-build', 'test', 'events')], '--grep test: its value as given');
  t.same(compiled('-g', 'test'), ['-g', 'test'], 'the short form too');
  t.same(compiled('--grep=test', 'test'), ['--grep=test', path.join('.tap-build', 'test')], 'with =, the value is part of the option');
  t.same(compiled('--bail', 'test'), ['--bail', path.join('.tap-build', 'test')], 'a flag takes no value: what follows is a path');
  t.same(compiled('--jobs', '4', 'test/test-notice.test.ts'), ['--jobs', '4', path.join('.tap-build', 'test', 'test-notice.test.js')]);
  t.same(compiled('.tap-build/test/test-notice.test.js'), ['.tap-build/test/test-notice.test.js'], 'a compiled path as given');
  t.same(compiled('elsewhere'), ['elsewhere'], 'what the build does not hold, as given');
  t.throws(() => compiled('test/no-such.test.ts'), /test\/no-such\.test\.ts is not a test file the build knows/);
});
