import { readFile } from 'node:fs/promises';
import t from 'tap';
import { CONFIG_VARIABLES } from '../src/config.js';
import { SANDBOX_CONFIG_VARIABLES } from '../src/sandbox/config.js';

const read = (file: string) => readFile(new URL(`../${file}`, import.meta.url), 'utf8');

t.test('.env.example lists every configuration variable', async (t) => {
  const example = await read('.env.example');
  const listed = new Set([...example.matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]));
  for (const name of [...CONFIG_VARIABLES, ...SANDBOX_CONFIG_VARIABLES]) t.ok(listed.has(name), `${name} is in .env.example`);
});

t.test('the README documents every configuration variable and the two commands', async (t) => {
  const readme = await read('README.md');
  for (const name of [...CONFIG_VARIABLES, ...SANDBOX_CONFIG_VARIABLES]) t.match(readme, `\`${name}\``, `${name} is in the README`);
  t.match(readme, 'npm test');
  t.match(readme, 'npm start');
  t.match(readme, /## Assumptions/);
});
