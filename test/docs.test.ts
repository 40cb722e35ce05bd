import { access, readdir, readFile } from 'node:fs/promises';
import t from 'tap';
import { CONFIG_VARIABLES } from '../src/config/config.js';
import { SANDBOX_CONFIG_VARIABLES } from '../src/sandbox/config.js';
import { rootUrl } from './helpers/root.js';

const read = (file: string) => readFile(rootUrl(file), 'utf8');

t.test('.env.example lists every configuration variable', async (t) => {
  const example = await read('.env.example');
  const listed = new Set([...example.matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]));
  for (const name of [...CONFIG_VARIABLES, ...SANDBOX_CONFIG_VARIABLES]) t.ok(listed.has(name), `${name} is in .env.example`);
});

t.test('the configuration pages document every variable; the README points at them and keeps the two commands', async (t) => {
  const configuration = await read('docs/configuration.md');
  for (const name of CONFIG_VARIABLES) t.match(configuration, `\`${name}\``, `${name} is in docs/configuration.md`);
  const sandbox = await read('docs/sandbox.md');
  for (const name of SANDBOX_CONFIG_VARIABLES) t.match(sandbox, `\`${name}\``, `${name} is in docs/sandbox.md`);
  const readme = await read('README.md');
  t.match(readme, '](docs/configuration.md');
  t.match(readme, '](docs/sandbox.md)');
  t.match(readme, 'npm test');
  t.match(readme, 'npm start');
  t.match(await read('docs/assumptions.md'), /^# Assumptions/);
  t.match(readme, '](docs/assumptions.md)');
});

t.test('every page under docs/ is linked from the README, and every relative link of the README and docs/ resolves', async (t) => {
  const readme = await read('README.md');
  const pages = (await readdir(rootUrl('docs/'))).filter((f) => f.endsWith('.md'));
  for (const page of pages) t.match(readme, `](docs/${page}`, `docs/${page} is linked from the README`);
  for (const file of ['README.md', ...pages.map((p) => `docs/${p}`)]) {
    const text = await read(file);
    for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue;
      const url = new URL(target!, rootUrl(file));
      await t.resolves(access(url), `${file} links ${target}`);
    }
  }
});
