# The Dockerfile (beside docker-compose.yml) with its two npm ci steps given BuildKit secrets:
# an .npmrc (a registry's credentials) and a CA bundle that exist only while npm runs, never in a
# layer, the build cache or the history. BuildKit only (the classic builder has no secrets):
#   DOCKER_BUILDKIT=1 docker build -f deploy/docker/secrets.Dockerfile \
#     --secret id=npmrc,src=$HOME/.npmrc --secret id=npm_ca,src=/path/to/ca-bundle.pem \
#     --build-arg NPM_CONFIG_REGISTRY=https://npm.example.internal/ .
# Both secrets are optional. Apart from this header and those mounts the two files are the same
# (test/deploy/dockerfile.test.ts): change the Dockerfile, then this one alike.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
# An npm registry mirror's URL (npm reads npm_config_registry); never credentials: build
# arguments are recorded in the history of the stages that use them (only these build stages).
ARG NPM_CONFIG_REGISTRY
WORKDIR /app
# npm-ca.pem, when the build context has one: the CA bundle of an internal registry or a
# TLS-inspecting proxy (public certificates), trusted by npm in these build stages only.
COPY package.json package-lock.json npm-ca.pe[m] ./
# --ignore-scripts: npm install's own build (prepare) waits for the sources, copied below.
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc --mount=type=secret,id=npm_ca,target=/app/npm-ca.pem \
  if [ -s npm-ca.pem ]; then export NODE_EXTRA_CA_CERTS=/app/npm-ca.pem; fi; \
  npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY migrations ./migrations
COPY bench ./bench
# tsc, then the console bundle (dist/console). No source maps ship: the image runs without
# --enable-source-maps, so they would only weigh (stack traces name the compiled files).
RUN npm run build \
  && find dist -name '*.map' -delete \
  && find dist -name '*.js' -exec sed -i '/^\/\/# sourceMappingURL=/d' {} +

FROM ${NODE_IMAGE} AS prod-deps
ARG NPM_CONFIG_REGISTRY
WORKDIR /app
COPY package.json package-lock.json npm-ca.pe[m] ./
# PGlite is the embedded database of a laptop without DATABASE_URL; the image runs in production
# mode, which refuses it, and src/db loads it only when it is used. The dependencies' own source
# maps go too, as ours do.
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc --mount=type=secret,id=npm_ca,target=/app/npm-ca.pem \
  if [ -s npm-ca.pem ]; then export NODE_EXTRA_CA_CERTS=/app/npm-ca.pem; fi; \
  npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
  && rm -rf node_modules/@electric-sql/pglite \
  && find node_modules -name '*.map' -delete \
  && npm cache clean --force

FROM ${NODE_IMAGE}
# Kept equal to package.json's version (test/deploy/dockerfile.test.ts); REVISION from the CI.
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="underwriting-gateway" \
      org.opencontainers.image.description="Partner-side gateway for the provider's asynchronous credit-card underwriting API" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# SANDBOX_*: the sandbox entry, run from this image, listens on the container's network and keeps
# its owed deliveries in the one writable directory.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data \
    SANDBOX_HOST=0.0.0.0 \
    SANDBOX_DATA_DIR=/data
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/migrations ./dist/migrations
COPY --from=build /app/dist/console ./dist/console
COPY package.json ./
# Numeric user with group 0, /data writable by the group: Kubernetes' runAsNonRoot can check a
# number, and OpenShift's arbitrary uid (always in group 0) can write where this one can.
RUN mkdir -p /data && chown 10001:0 /data && chmod g=u /data
USER 10001:0
EXPOSE 3000 4010
# Liveness only (/healthz): a database blip must not mark the container unhealthy (/readyz is for
# the load balancer). Whichever entry runs answers: the gateway on PORT, the sandbox on SANDBOX_PORT.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "const e=process.env;Promise.any([e.PORT||3000,e.SANDBOX_PORT||4010].map(p=>fetch('http://127.0.0.1:'+p+'/healthz',{signal:AbortSignal.timeout(3000)}).then(r=>{if(!r.ok)throw new Error(r.status)}))).then(()=>process.exit(0),()=>process.exit(1))"]
# A young generation of at most 3 x 4 MB, and an old one let grow to twice what survived the last
# full collection (V8 lets it grow to 4x), keep the RSS under load well below 200 MB (bench/README.md).
CMD ["node", "--max-semi-space-size=4", "--heap-growing-percent=100", "dist/src/server.js"]
