import { buildApp } from '../src/app.js';
import { openDatabase } from '../src/db/database.js';
import { loadConfig } from '../src/config.js';
const database = await openDatabase({ databaseUrl: undefined, dataDir: 'memory://' });
const config = loadConfig({ NODE_ENV: 'test', PROVIDER_BASE_URL: 'http://127.0.0.1:9', PARTNER_TOKEN: 'T'.repeat(32) + '0123456789abcdefghijklmnopqrstuv', CPF_HASH_KEY: 'test-cpf-hash-key-0123456789abcdef' });
const app = await buildApp({ config, database });
const res = await app.inject({ method: 'GET', url: '/docs/json' });
process.stdout.write(res.body);
await app.close(); await database.close();
