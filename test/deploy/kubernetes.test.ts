import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import ts from 'typescript';
import { parseAllDocuments, parse } from 'yaml';
import { ROOT } from '../helpers/root.js';

// deploy/kubernetes/ is a kustomize base. No cluster and no kustomize binary in CI: the test
// renders the base itself (its kustomization may only list resources, which is all it renders),
// validates every object against the Kubernetes API schemas of kubernetes-models (generated from
// the API's OpenAPI document, compiled by ajv), checks unknown fields against the same package's
// types (the schemas allow them; kubectl's strict validation does not), then checks the rules.

const BASE = path.join(ROOT, 'deploy/kubernetes');

type Manifest = Record<string, any> & { apiVersion: string; kind: string; metadata: { name: string } };

function render(dir: string): Manifest[] {
  const kustomization = parse(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8')) as Record<string, unknown>;
  const unrendered = Object.keys(kustomization).filter((k) => !['apiVersion', 'kind', 'resources'].includes(k));
  if (unrendered.length > 0) throw new Error(`kustomization.yaml uses ${unrendered.join(', ')}, which this test does not render`);
  return (kustomization.resources as string[]).flatMap((file) =>
    parseAllDocuments(readFileSync(path.join(dir, file), 'utf8')).map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      return doc.toJS() as Manifest;
    }),
  );
}

const modulePath = (m: Pick<Manifest, 'apiVersion' | 'kind'>) => `kubernetes-models/${m.apiVersion}/${m.kind}`;

/** The API schema's verdict: undefined when valid, else ajv's message. */
async function schemaErrors(manifest: Manifest): Promise<string | undefined> {
  const Model = (await import(modulePath(manifest)))[manifest.kind] as new (data: unknown) => { validate(): void };
  try {
    new Model(manifest).validate();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Fields the API does not know (and wrong types), as TypeScript's excess-property check finds them. */
function unknownFieldErrors(manifests: Manifest[]): string[] {
  const file = path.join(ROOT, 'test/deploy/__manifests__.ts');
  const source = manifests
    .map((m, i) => `import type { I${m.kind} as T${i} } from '${modulePath(m)}';\nexport const m${i}: T${i} = ${JSON.stringify(m)};\n`)
    .join('');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const read = host.readFile.bind(host);
  const exists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (name) => (path.resolve(name) === file ? source : read(name));
  host.fileExists = (name) => path.resolve(name) === file || exists(name);
  host.getSourceFile = (name, version, ...rest) =>
    path.resolve(name) === file ? ts.createSourceFile(name, source, version) : getSourceFile(name, version, ...rest);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const index = at ? Number(/export const m(\d+)/.exec(source.split('\n')[at.line] ?? '')?.[1] ?? -1) : -1;
    const where = index >= 0 ? `${manifests[index]!.kind}/${manifests[index]!.metadata.name}` : 'manifests';
    return `${where}: ${message}`;
  });
}

const manifests = render(BASE);
const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const one = (kind: string) => {
  const found = byKind(kind);
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`);
  return found[0]!;
};

t.test('the base renders a Deployment, Service, PodDisruptionBudget, NetworkPolicy, migration Job and ConfigMap', async (t) => {
  t.same(manifests.map((m) => m.kind).sort(), ['ConfigMap', 'Deployment', 'Job', 'NetworkPolicy', 'PodDisruptionBudget', 'Service']);
  t.same(byKind('Secret'), [], 'no Secret with values in the base: it is referenced, created apart');
});

t.test('every object is valid against the Kubernetes API schemas', async (t) => {
  for (const manifest of manifests) t.equal(await schemaErrors(manifest), undefined, `${manifest.kind}/${manifest.metadata.name}`);
});

t.test('no object carries a field the API does not know', async (t) => {
  t.same(unknownFieldErrors(manifests), []);
});

t.test('both checks catch a broken manifest', async (t) => {
  const deployment = structuredClone(one('Deployment'));
  deployment.spec.replicas = 'two';
  t.match(await schemaErrors(deployment), /replicas must be integer/);
  const typo = structuredClone(one('Deployment'));
  typo.spec.template.spec.containers[0].readinesProbe = typo.spec.template.spec.containers[0].readinessProbe;
  delete typo.spec.template.spec.containers[0].readinessProbe;
  t.equal(await schemaErrors(typo), undefined, 'the schemas allow unknown fields...');
  t.match(unknownFieldErrors([typo]).join('\n'), /readinesProbe/, '...the types do not');
});

const deployment = one('Deployment');
const pod = deployment.spec.template.spec;
const gateway = pod.containers[0];
const job = one('Job');

/** The image's USER, "uid:gid". */
const imageUser = /^USER (\d+):(\d+)$/m.exec(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))!;

t.test('the Deployment runs two or more replicas, rolled one at a time with none unavailable', async (t) => {
  t.ok(deployment.spec.replicas >= 2);
  t.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
});

t.test('liveness probes /healthz, readiness /readyz, on the container port', async (t) => {
  t.equal(gateway.livenessProbe.httpGet.path, '/healthz');
  t.equal(gateway.readinessProbe.httpGet.path, '/readyz');
  t.equal(gateway.startupProbe.httpGet.path, '/healthz');
  for (const probe of [gateway.livenessProbe, gateway.readinessProbe, gateway.startupProbe]) t.equal(probe.httpGet.port, gateway.ports[0].name);
  t.equal(gateway.ports[0].containerPort, 3000);
});

t.test('the pods run as the image user, non-root, with a read-only root and no capabilities', async (t) => {
  for (const [name, spec] of [
    ['gateway', pod],
    ['migration', job.spec.template.spec],
  ] as const) {
    const container = spec.containers[0];
    t.equal(spec.securityContext.runAsNonRoot, true, `${name}: runAsNonRoot`);
    t.equal(spec.securityContext.runAsUser, Number(imageUser[1]), `${name}: the Dockerfile's numeric USER`);
    t.equal(spec.securityContext.runAsGroup, Number(imageUser[2]), `${name}: group 0`);
    t.equal(container.securityContext.readOnlyRootFilesystem, true, `${name}: read-only root`);
    t.equal(container.securityContext.allowPrivilegeEscalation, false, `${name}: no privilege escalation`);
    t.same(container.securityContext.capabilities.drop, ['ALL'], `${name}: no capabilities`);
    t.ok(container.resources.requests.memory && container.resources.limits.memory, `${name}: memory requested and limited`);
    t.equal(spec.automountServiceAccountToken, false, `${name}: no API token`);
  }
});

t.test('the grace period outlasts preStop, the drain delay and the gateway own shutdown grace', async (t) => {
  const config = one('ConfigMap').data as Record<string, string>;
  const [command, seconds] = gateway.lifecycle.preStop.exec.command as [string, string];
  t.equal(command, 'sleep');
  const appGraceMs = Number(/const SHUTDOWN_GRACE_MS = ([\d_]+);/.exec(readFileSync(path.join(ROOT, 'src/server.ts'), 'utf8'))![1]!.replace(/_/g, ''));
  const needed = Number(seconds) + Number(config.SHUTDOWN_DRAIN_MS) / 1000 + appGraceMs / 1000;
  t.ok(pod.terminationGracePeriodSeconds >= needed + 5, `${pod.terminationGracePeriodSeconds} s leaves at least 5 s beyond ${needed} s`);
});

t.test('secrets come from the Secret as files, never as environment values', async (t) => {
  const mount = gateway.volumeMounts.find((m: any) => m.name === 'secrets');
  const volume = pod.volumes.find((v: any) => v.name === 'secrets');
  t.equal(volume.secret.secretName, 'underwriting-gateway');
  const files = gateway.env.filter((e: any) => e.name.endsWith('_FILE'));
  t.same(files.map((e: any) => e.name).sort(), ['CPF_HASH_KEY_FILE', 'DATABASE_URL_FILE', 'PARTNER_TOKEN_FILE'], 'what production mode requires (the rest: ConfigMap)');
  for (const e of files) t.equal(e.value, `${mount.mountPath}/${e.name.replace(/_FILE$/, '')}`, `${e.name} names its key's file`);
  t.notOk(JSON.stringify(manifests).includes('secretKeyRef'), 'no secret in an environment variable');
  const config = one('ConfigMap').data as Record<string, string>;
  for (const name of ['DATABASE_URL', 'PARTNER_TOKEN', 'CPF_HASH_KEY', 'CALLBACK_SECRET', 'QUERY_API_KEYS', 'ADMIN_API_KEYS', 'CLIENT_SECRET']) {
    t.notOk(name in config, `${name} is not in the ConfigMap`);
  }
  t.same(Object.keys(config).filter((k) => k === 'MIGRATE_ON_START'), ['MIGRATE_ON_START']);
  t.equal(config.MIGRATE_ON_START, 'false', 'the Job migrates, not every replica');
});

t.test('the migration Job runs the migrate entry with the image and only the database secret', async (t) => {
  const container = job.spec.template.spec.containers[0];
  t.equal(container.image, gateway.image);
  t.same(container.command, ['node', 'dist/src/db/migrate-cli.js']);
  t.same(
    container.env.map((e: any) => e.name),
    ['DATABASE_URL_FILE'],
  );
  t.same(
    job.spec.template.spec.volumes[0].secret.items.map((i: any) => i.key),
    ['DATABASE_URL'],
  );
  t.equal(job.spec.template.spec.restartPolicy, 'Never');
  t.ok(job.spec.backoffLimit >= 1 && job.spec.activeDeadlineSeconds > 0);
});

t.test('Service, PodDisruptionBudget and NetworkPolicy select the gateway pods (and not the Job)', async (t) => {
  const labels = deployment.spec.template.metadata.labels as Record<string, string>;
  const jobLabels = job.spec.template.metadata.labels as Record<string, string>;
  const matches = (selector: Record<string, string>, l: Record<string, string>) => Object.entries(selector).every(([k, v]) => l[k] === v);
  for (const [name, selector] of [
    ['Service', one('Service').spec.selector],
    ['PodDisruptionBudget', one('PodDisruptionBudget').spec.selector.matchLabels],
    ['NetworkPolicy', one('NetworkPolicy').spec.podSelector.matchLabels],
    ['Deployment', deployment.spec.selector.matchLabels],
  ] as const) {
    t.ok(matches(selector, labels), `${name} selects the gateway`);
    t.notOk(matches(selector, jobLabels), `${name} does not select the migration`);
  }
  t.equal(one('Service').spec.ports[0].targetPort, gateway.ports[0].name);
  t.ok(one('PodDisruptionBudget').spec.minAvailable >= 1);
  t.ok(one('PodDisruptionBudget').spec.minAvailable < deployment.spec.replicas, 'a drain can still move one pod');
});

t.test('the NetworkPolicy admits the provider egress addresses to the gateway port only', async (t) => {
  const policy = one('NetworkPolicy').spec;
  const config = one('ConfigMap').data as Record<string, string>;
  t.same(policy.policyTypes, ['Ingress', 'Egress']);
  for (const rule of policy.ingress) t.same(rule.ports, [{ port: gateway.ports[0].name, protocol: 'TCP' }], 'every ingress rule: the gateway port alone');
  const blocks = policy.ingress.flatMap((rule: any) => rule.from.filter((f: any) => f.ipBlock).map((f: any) => f.ipBlock.cidr));
  t.same(blocks, config.CALLBACK_ALLOWED_IPS!.split(','), 'the addresses the gateway lets call back, and no others');
});
