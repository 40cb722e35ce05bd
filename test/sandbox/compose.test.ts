import { readFile } from 'node:fs/promises';
import t from 'tap';
import { parse } from 'yaml';
import { addressMatcher } from '../../src/access/addresses.js';
import { loadConfig } from '../../src/config/config.js';
import { loadSandboxConfig } from '../../src/sandbox/config.js';
import { rootUrl } from '../helpers/root.js';

// No Docker engine runs in CI: the compose file is checked for structure and consistent wiring.
// Compose reads YAML merge keys (<<: *image), so the parse does too.
const compose = parse(await readFile(rootUrl('docker-compose.yml'), 'utf8'), { merge: true }) as Record<string, any>;
const services = compose.services as Record<string, any>;
const envOf = (name: string) => services[name].environment as Record<string, string>;
/**
 * The network is Docker's pick from its default pools (172.17-31.x.x/16, then 192.168.x.x/20), so
 * containers and the host's gateway address may be any of these.
 */
const dockerNetworks = [
  { container: '172.17.0.7', host: '172.17.0.1' },
  { container: '172.29.0.3', host: '172.29.0.1' },
  { container: '192.168.32.2', host: '192.168.32.1' },
];
/** ${VAR:-default}: what compose publishes with VAR unset. */
const withDefaults = (value: string) => value.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1');

t.test('it defines postgres, gateway and sandbox, each with a healthcheck', async (t) => {
  t.same(Object.keys(services).sort(), ['gateway', 'postgres', 'sandbox']);
  t.match(services.postgres.image, /^postgres:1[67]-alpine$/);
  // Over TCP: the image's first-start temporary server listens on its socket only.
  t.match(services.postgres.healthcheck.test.join(' '), /pg_isready -h 127\.0\.0\.1 /);
  t.match(services.postgres.volumes, [/^pgdata:\/var\/lib\/postgresql\/data$/]);
  t.ok('pgdata' in compose.volumes, 'the data volume is named');
  t.match(services.gateway.healthcheck.test.join(' '), /127\.0\.0\.1:3000\/readyz/);
  t.match(services.sandbox.healthcheck.test.join(' '), /127\.0\.0\.1:4010\/healthz/);
});

t.test('the gateway waits for a healthy database only, and publishes port 3000 on loopback, on a host port one may change', async (t) => {
  t.equal(services.gateway.build, '.');
  t.same(Object.keys(services.gateway.depends_on), ['postgres'], 'not on the sandbox');
  t.equal(services.gateway.depends_on.postgres.condition, 'service_healthy');
  t.same(services.gateway.ports, ['127.0.0.1:${GATEWAY_HOST_PORT:-3000}:3000']);
  t.same(services.gateway.ports.map(withDefaults), ['127.0.0.1:3000:3000']);
  t.equal(services.gateway.command, undefined, "the image's own command runs the gateway");
});

t.test('the sandbox is the same image, built once, running the sandbox entry on port 4010 on loopback', async (t) => {
  t.equal(services.sandbox.build, undefined, 'only the gateway builds');
  t.equal(services.sandbox.pull_policy, 'never', 'the image is never looked for in a registry');
  t.match(services.gateway.image, /^[a-z0-9._/-]+:[a-z0-9._-]+$/);
  t.equal(services.sandbox.image, services.gateway.image, 'one image');
  t.same(services.sandbox.command, ['node', 'dist/src/sandbox/server.js']);
  t.same(services.sandbox.ports, ['127.0.0.1:${SANDBOX_HOST_PORT:-4010}:4010']);
  t.same(services.sandbox.ports.map(withDefaults), ['127.0.0.1:4010:4010']);
});

t.test("the sandbox's owed deliveries live in a volume", async (t) => {
  t.equal(envOf('sandbox').SANDBOX_DATA_DIR, '/data');
  t.same(services.sandbox.volumes, ['sandbox-data:/data']);
  t.ok('sandbox-data' in compose.volumes, 'a named volume');
});

t.test("no top-level name (Compose v1 rejects it)", async (t) => {
  t.notOk('name' in compose);
});

t.test("Docker's stop timeout outlasts the gateway's own shutdown grace", async (t) => {
  const graceMs = Number(/const SHUTDOWN_GRACE_MS = ([\d_]+);/.exec(await readFile(rootUrl('src/server.ts'), 'utf8'))![1]!.replace(/_/g, ''));
  for (const name of ['gateway', 'sandbox']) {
    const seconds = Number(/^(\d+)s$/.exec(services[name].stop_grace_period)?.[1]);
    t.ok(seconds * 1000 >= graceMs + 5000, `${name}: stop_grace_period ${services[name].stop_grace_period} leaves 5 s beyond ${graceMs} ms`);
  }
});

t.test('no fixed subnet that could collide with the host networks', async (t) => {
  t.notOk(compose.networks?.default?.ipam, 'Docker picks the network');
});

t.test('a configuration error (exit 1) is retried a few times, never in an endless loop', async (t) => {
  for (const name of ['gateway', 'sandbox']) {
    t.match(services[name].restart, /^on-failure:\d+$/, `${name}: on-failure with a maximum`);
  }
});

t.test("the gateway's environment passes its own production configuration", async (t) => {
  const config = loadConfig(envOf('gateway'));
  t.equal(config.nodeEnv, 'production');
  t.equal(config.sandboxMode, false);
  t.equal(config.port, 3000);
  const databaseUrl = new URL(config.databaseUrl!);
  t.equal(databaseUrl.hostname, 'postgres', 'DATABASE_URL points at the postgres service');
  t.equal(databaseUrl.username, envOf('postgres').POSTGRES_USER);
  t.equal(databaseUrl.password, envOf('postgres').POSTGRES_PASSWORD);
  t.equal(databaseUrl.pathname, `/${envOf('postgres').POSTGRES_DB}`);
});

t.test('gateway and sandbox point at each other and share the partner token', async (t) => {
  const gateway = loadConfig(envOf('gateway'));
  const sandbox = loadSandboxConfig(envOf('sandbox'));
  const provider = new URL(gateway.providerBaseUrl!);
  t.equal(provider.hostname, 'sandbox');
  t.equal(Number(provider.port), sandbox.port);
  t.equal(sandbox.host, '0.0.0.0', 'the sandbox listens on the compose network');
  const callback = new URL(sandbox.callbackUrl!);
  t.equal(callback.hostname, 'gateway');
  t.equal(Number(callback.port), gateway.port);
  t.equal(callback.pathname, '/v1/callbacks/underwriting');
  t.equal(gateway.partnerToken, sandbox.partnerToken);
});

t.test('the allowlists let in the compose network and the host, whichever network Docker picks, and not the outside world', async (t) => {
  const gateway = loadConfig(envOf('gateway'));
  const sandbox = loadSandboxConfig(envOf('sandbox'));
  for (const { container, host } of dockerNetworks) {
    t.ok(addressMatcher(gateway.callbackAllowedIps)(container), `the sandbox container (${container}) may call back`);
    t.ok(addressMatcher(sandbox.allowedIps)(container), `the gateway container (${container}) may submit to the sandbox`);
    t.ok(addressMatcher(gateway.submitAllowedIps)(host), `the host (${host}) may submit`);
    t.ok(addressMatcher(gateway.queryAllowedIps)(host), `the host (${host}) may query`);
  }
  for (const outsider of ['203.0.113.5', '8.8.8.8', '2001:db8::1']) {
    t.notOk(addressMatcher(gateway.callbackAllowedIps)(outsider), `${outsider} may not call back`);
    t.notOk(addressMatcher(gateway.submitAllowedIps)(outsider), `${outsider} may not submit`);
    t.notOk(addressMatcher(sandbox.allowedIps)(outsider), `${outsider} may not call the sandbox`);
  }
});
