import { readFile } from 'node:fs/promises';
import t from 'tap';
import { parse } from 'yaml';
import { addressMatcher } from '../../src/access/addresses.js';
import { loadConfig } from '../../src/config.js';
import { loadSandboxConfig } from '../../src/sandbox/config.js';

// No Docker engine runs in CI: the compose file is checked for structure and consistent wiring.
const compose = parse(await readFile(new URL('../../docker-compose.yml', import.meta.url), 'utf8')) as Record<string, any>;
const services = compose.services as Record<string, any>;
const envOf = (name: string) => services[name].environment as Record<string, string>;
const subnet = compose.networks.default.ipam.config[0] as { subnet: string; gateway: string };
/** Some address Docker may give a container on the compose network. */
const containerAddress = subnet.subnet.replace(/0\.0\/16$/, '0.7');

t.test('it defines postgres, gateway and sandbox, each with a healthcheck', async (t) => {
  t.same(Object.keys(services).sort(), ['gateway', 'postgres', 'sandbox']);
  t.match(services.postgres.image, /^postgres:1[67]-alpine$/);
  t.match(services.postgres.healthcheck.test.join(' '), /pg_isready/);
  t.match(services.postgres.volumes, [/^pgdata:\/var\/lib\/postgresql\/data$/]);
  t.ok('pgdata' in compose.volumes, 'the data volume is named');
  t.match(services.gateway.healthcheck.test.join(' '), /127\.0\.0\.1:3000\/readyz/);
  t.match(services.sandbox.healthcheck.test.join(' '), /127\.0\.0\.1:4010\/healthz/);
});

t.test('the gateway waits for a healthy database and publishes port 3000', async (t) => {
  t.equal(services.gateway.build, '.');
  t.equal(services.gateway.depends_on.postgres.condition, 'service_healthy');
  t.same(services.gateway.ports, ['3000:3000']);
  t.equal(services.gateway.command, undefined, "the image's own command runs the gateway");
});

t.test('the sandbox is the same image running the sandbox entry on port 4010', async (t) => {
  t.equal(services.sandbox.build, '.');
  t.same(services.sandbox.command, ['node', 'dist/src/sandbox/server.js']);
  t.same(services.sandbox.ports, ['4010:4010']);
});

t.test("the gateway's environment passes its own production configuration", async (t) => {
  const config = loadConfig(envOf('gateway'));
  t.equal(config.nodeEnv, 'production');
  t.equal(config.sandboxMode, false);
  t.equal(config.port, 3000);
  const db = new URL(config.databaseUrl!);
  t.equal(db.hostname, 'postgres', 'DATABASE_URL points at the postgres service');
  t.equal(db.username, envOf('postgres').POSTGRES_USER);
  t.equal(db.password, envOf('postgres').POSTGRES_PASSWORD);
  t.equal(db.pathname, `/${envOf('postgres').POSTGRES_DB}`);
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

t.test('the allowlists let the compose network and the host in, and no one else', async (t) => {
  const gateway = loadConfig(envOf('gateway'));
  const sandbox = loadSandboxConfig(envOf('sandbox'));
  t.ok(addressMatcher(gateway.callbackAllowedIps)(containerAddress), 'the sandbox container may call back');
  t.ok(addressMatcher(sandbox.allowedIps)(containerAddress), 'the gateway container may submit to the sandbox');
  t.ok(addressMatcher(gateway.submitAllowedIps)(subnet.gateway), 'the host may submit');
  t.ok(addressMatcher(gateway.queryAllowedIps)(subnet.gateway), 'the host may query');
  t.notOk(addressMatcher(gateway.submitAllowedIps)(containerAddress), 'other containers may not submit');
  t.notOk(addressMatcher(gateway.callbackAllowedIps)('203.0.113.5'), 'the outside world may not call back');
});
