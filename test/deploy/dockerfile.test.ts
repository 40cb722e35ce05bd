import { existsSync, readFileSync } from 'node:fs';
import t from 'tap';
import { ROOT } from '../helpers/root.js';

// The image is built and run for real by scripts/ci/container-test.sh (a Docker daemon of its own);
// these are the rules a text change could break without that script noticing at once.

const read = (file: string) => readFileSync(`${ROOT}${file}`, 'utf8');
const dockerfile = read('Dockerfile');
const secrets = read('deploy/docker/secrets.Dockerfile');
const MOUNTS = '--mount=type=secret,id=npmrc,target=/root/.npmrc --mount=type=secret,id=npm_ca,target=/app/npm-ca.pem';

/** From the first instruction on: what the builder reads, without the header comment. */
const body = (text: string) => text.slice(text.indexOf('\nARG NODE_IMAGE=') + 1);

t.test('no frontend to fetch: no # syntax line, and no BuildKit-only flag in the Dockerfile', async (t) => {
  t.notMatch(dockerfile, /^#\s*syntax\s*=/im);
  t.notMatch(dockerfile, /--mount=/, 'the classic builder refuses RUN --mount');
  t.match(dockerfile, /^ARG NODE_IMAGE=node:24-bookworm-slim$/m, 'the base is a build argument (pin it by digest)');
});

t.test('the secrets variant is the Dockerfile with secret mounts on its npm steps, nothing else', async (t) => {
  const npmSteps = body(dockerfile).match(/^RUN if \[ -s npm-ca\.pem \]/gm) ?? [];
  t.equal(npmSteps.length, 2, 'two npm ci steps (build and production dependencies)');
  t.equal(body(secrets), body(dockerfile).replaceAll('RUN if [ -s npm-ca.pem ]', `RUN ${MOUNTS} \\\n  if [ -s npm-ca.pem ]`));
});

t.test('a numeric user in group 0, and /data writable by the group', async (t) => {
  t.match(dockerfile, /^USER 10001:0$/m);
  t.match(dockerfile, /chown 10001:0 \/data && chmod g=u \/data/);
});

t.test('the sandbox entry, run from the image, listens on the container network and writes to /data', async (t) => {
  t.match(dockerfile, /SANDBOX_HOST=0\.0\.0\.0/);
  t.match(dockerfile, /SANDBOX_DATA_DIR=\/data/);
  t.match(dockerfile, /DATA_DIR=\/data/);
});

t.test('HEALTHCHECK is liveness (/healthz) on whichever port the entry serves', async (t) => {
  const healthcheck = /^HEALTHCHECK .*\\\n\s+CMD (\[.*\])$/m.exec(dockerfile);
  t.ok(healthcheck, 'an exec-form HEALTHCHECK');
  const command = (JSON.parse(healthcheck![1]!) as string[]).join(' ');
  t.match(command, /\/healthz/);
  t.notMatch(command, /\/readyz/, 'a database blip must not mark the container unhealthy');
  t.match(command, /e\.PORT\|\|3000/);
  t.match(command, /e\.SANDBOX_PORT\|\|4010/);
});

t.test('no source maps and no PGlite in the image', async (t) => {
  t.match(dockerfile, /find dist -name '\*\.map' -delete/);
  t.match(dockerfile, /find node_modules -name '\*\.map' -delete/, "and the dependencies' own");
  t.match(dockerfile, /rm -rf node_modules\/@electric-sql\/pglite/);
  t.notMatch(dockerfile.split('\n').filter((l) => l.startsWith('CMD ')).join(), /enable-source-maps/, 'nothing would read them');
  // Production without the package must still start: src loads it only for the embedded database.
  t.notMatch(read('src/db/pglite.ts'), /^import \{[^}]*\} from '@electric-sql\/pglite'/m);
});

t.test('the OCI version label follows package.json', async (t) => {
  const version = (JSON.parse(read('package.json')) as { version: string }).version;
  t.match(dockerfile, new RegExp(`^ARG VERSION=${version.replaceAll('.', '\\.')}$`, 'm'));
  t.match(dockerfile, /org\.opencontainers\.image\.version="\$\{VERSION\}"/);
});

t.test('everything the build copies is in the context (.dockerignore allows it) and in the tree', async (t) => {
  const ignore = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  t.equal(ignore[0], '*', 'an allowlist: nothing else reaches the daemon');
  const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1));
  const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/));
  for (const source of copied) {
    if (source.includes('[')) {
      t.ok(allowed.includes(source.replace(/\[(.)\]/, '$1')), `${source}: optional, allowed when present`);
      continue;
    }
    t.ok(
      allowed.some((a) => source === a || a.startsWith(`${source}/`)),
      `${source} is allowed`,
    );
    t.ok(existsSync(`${ROOT}${source}`), `${source} exists`);
  }
  t.ok(allowed.includes('scripts/build.mjs'), 'npm run build needs scripts/build.mjs');
  t.match(read('.gitignore'), /^npm-ca\.pem$/m, 'a CA bundle put there for a build is never committed');
});
