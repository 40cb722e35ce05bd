import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { allowlistGuard } from '../access/guards.js';
import { AppError, notFound } from '../http/errors.js';
import { type Asset, consoleAssetsDir, loadAssets } from './assets.js';

export interface ConsoleDeps {
  config: { queryAllowedIps: readonly string[] };
  /** Where the built bundle lives; default: dist/console under the package root. */
  assetsDir?: string;
}

/**
 * The page loads only from the gateway itself and runs nothing inline; the API routes keep their
 * own stricter policy (helmet's, set for every route in app.ts and replaced here).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const assetParams = z.strictObject({ name: z.string().regex(/^[A-Za-z0-9_.-]{1,100}$/) });

/** GET /console and its files: the operators' page, a client of the query API (query allowlist; the API calls carry the key). */
export const consoleRoutes =
  (deps: ConsoleDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const dir = deps.assetsDir ?? consoleAssetsDir();
    let loaded: Promise<Map<string, Asset> | undefined> | undefined;
    // Read once, on first use: a gateway that never serves the page never touches the files.
    const assets = async () => {
      loaded ??= loadAssets(dir);
      const found = await loaded;
      if (!found) {
        loaded = undefined;
        throw new AppError(503, 'console_not_built', 'the console is not built; run npm run build');
      }
      return found;
    };

    app.addHook('onRequest', allowlistGuard('query', deps.config.queryAllowedIps));
    app.addHook('onSend', async (_request, reply, payload) => {
      void reply.header('content-security-policy', CONSOLE_CSP);
      return payload;
    });

    app.get('/console', { schema: { hide: true } }, async (_request, reply) => {
      const page = (await assets()).get('index.html') as Asset;
      return reply.type(page.type).header('cache-control', 'no-cache').send(page.body);
    });

    // A relative link from /console/ would miss the assets; send it to the one address of the page.
    app.get('/console/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('../console', 308));

    app.get('/console/:name', { schema: { hide: true, params: assetParams } }, async (request, reply) => {
      const asset = (await assets()).get(request.params.name);
      // The name is not echoed: it is the client's text (a CPF or a key typed into the URL would come back).
      if (!asset || request.params.name === 'index.html') throw notFound('no such console file');
      return reply
        .type(asset.type)
        .header('cache-control', asset.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
        .send(asset.body);
    });
  };
