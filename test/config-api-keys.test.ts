import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../src/config/config.js';
import { configProblems } from './helpers/config.js';

// An API key is presented as `Authorization: Bearer <key>`: one token, no whitespace. A key list
// given one key per line (a natural way to write a QUERY_API_KEYS_FILE) used to be accepted as a
// single key holding a line break, which no request can present: the gateway started and refused
// every caller 401. Such a configuration is invalid and stops the start, naming the variable.

for (const name of ['QUERY_API_KEYS', 'ADMIN_API_KEYS'] as const) {
  t.test(`${name}_FILE with one key per line is refused at start, naming ${name}`, async (t) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ugw-keys-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'keys');
    await writeFile(file, 'first-key-of-the-list-0001\nsecond-key-of-the-list-0002\n');
    const problems = configProblems(loadConfig, { [`${name}_FILE`]: file });
    t.equal(problems.length, 1, problems.join('; '));
    t.match(problems[0], new RegExp(`^${name} \\(from ${name}_FILE\\): .*line breaks`));
    t.notMatch(problems.join('\n'), /first-key|second-key/, 'never the keys themselves');
  });

  t.test(`${name} with a space or a tab inside a key is refused`, async (t) => {
    for (const value of ['first-key-of-the list-0001', 'first-key-of-the\tlist-0001,other-key-of-the-list-01']) {
      const problems = configProblems(loadConfig, { [name]: value });
      t.equal(problems.length, 1, problems.join('; '));
      t.match(problems[0], new RegExp(`^${name}: `));
    }
  });

  t.test(`${name}: a comma list, spaces around the commas and a trailing newline are still fine`, async (t) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'ugw-keys-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'keys');
    await writeFile(file, 'first-key-of-the-list-0001, second-key-of-the-list-0002\r\n');
    const config = loadConfig({ [`${name}_FILE`]: file });
    const keys = name === 'QUERY_API_KEYS' ? config.queryApiKeys : config.adminApiKeys;
    t.same(keys, ['first-key-of-the-list-0001', 'second-key-of-the-list-0002']);
  });
}
