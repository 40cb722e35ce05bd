import { createPublicKey, randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { exportJWK, generateKeyPair, type JWK, jwtVerify, SignJWT } from 'jose';
import { z } from 'zod';
import { secretMatches } from '../access/guards.js';
import type { SandboxConfig } from './config.js';

export const SANDBOX_ISSUER = 'underwriting-sandbox';
const ALGORITHM = 'RS256';

export interface TokenSigner {
  sign(claims: { clientId: string; scope: string; ttlS: number }): Promise<string>;
  jwks: { keys: JWK[] };
}

/** A fresh RSA key per start: tokens from an earlier run are not meant to survive a restart. */
export async function createTokenSigner(): Promise<TokenSigner> {
  const { privateKey, publicKey } = await generateKeyPair(ALGORITHM);
  const kid = randomUUID();
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: ALGORITHM, use: 'sig' };
  return {
    jwks: { keys: [jwk] },
    sign: ({ clientId, scope, ttlS }) =>
      new SignJWT({ scope, client_id: clientId })
        .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT', kid })
        .setIssuer(SANDBOX_ISSUER)
        .setSubject(clientId)
        .setIssuedAt()
        .setExpirationTime(Math.floor(Date.now() / 1000) + ttlS)
        .setJti(randomUUID())
        .sign(privateKey),
  };
}

const oauthError = z.object({ error: z.string(), error_description: z.string() });
type OAuthError = z.infer<typeof oauthError>;
const tokenResponse = z.object({ access_token: z.string(), expires_in: z.number().int(), token_type: z.literal('Bearer') });
const tokenForm = z.record(z.string(), z.string());
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** Assertions must be short-lived: refuse any issued longer ago than this. */
const ASSERTION_MAX_AGE_S = 300;

/**
 * RFC 7523 2.2: a JWT signed by the client's key, iss = sub = client id, aud = the token URL
 * (checked by path: the simulator cannot know the host name its clients use), not expired.
 */
async function assertionClientId(
  assertion: string,
  publicKeyPem: string,
  clientId: string,
): Promise<string | undefined> {
  try {
    const { payload } = await jwtVerify(assertion, createPublicKey(publicKeyPem), {
      algorithms: ['RS256', 'ES256'],
      issuer: clientId,
      subject: clientId,
      maxTokenAge: ASSERTION_MAX_AGE_S,
      requiredClaims: ['exp', 'aud'],
    });
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud ?? ''];
    const forUs = audiences.some((aud) => {
      try {
        return new URL(aud).pathname === '/oauth2/token';
      } catch {
        return false;
      }
    });
    return forUs ? clientId : undefined;
  } catch {
    return undefined;
  }
}

/** The client id and secret of an HTTP Basic header (RFC 6749 2.3.1: each form-urlencoded). */
function basicCredentials(header: string | undefined): { id: string; secret: string } | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  try {
    const unescape = (s: string) => decodeURIComponent(s.replace(/\+/g, ' '));
    return { id: unescape(decoded.slice(0, colon)), secret: unescape(decoded.slice(colon + 1)) };
  } catch {
    return undefined;
  }
}

type Authentication = { clientId: string } | { status: 400 | 401; refused: OAuthError };
const refuse = (status: 400 | 401, error: string, description: string): Authentication => ({
  status,
  refused: { error, error_description: description },
});

/** Who the client is: HTTP Basic (the spec), or an RFC 7523 assertion when a public key is configured. */
async function authenticate(
  authorization: string | undefined,
  form: Record<string, string>,
  config: Readonly<SandboxConfig>,
): Promise<Authentication> {
  if (form.client_assertion !== undefined) {
    if (form.client_assertion_type !== JWT_BEARER) {
      return refuse(400, 'invalid_request', `client_assertion_type must be ${JWT_BEARER}`);
    }
    if (config.clientAssertionPublicKey === undefined) {
      return refuse(401, 'invalid_client', 'client assertions are not enabled (SANDBOX_CLIENT_ASSERTION_PUBLIC_KEY)');
    }
    const named = form.client_id;
    const clientId =
      named === undefined || named === config.clientId
        ? await assertionClientId(form.client_assertion, config.clientAssertionPublicKey, config.clientId)
        : undefined;
    return clientId ? { clientId } : refuse(401, 'invalid_client', 'the client assertion is not valid for this client');
  }
  const credentials = basicCredentials(authorization);
  if (!credentials) return refuse(401, 'invalid_client', 'client authentication with HTTP Basic is required');
  // Both compared every time, in constant time: the answer does not say which one was wrong.
  const known = secretMatches(credentials.id, [config.clientId]);
  const secretOk = secretMatches(credentials.secret, [config.clientSecret]);
  return known && secretOk ? { clientId: credentials.id } : refuse(401, 'invalid_client', 'unknown client or wrong client secret');
}

/** POST /oauth2/token (client credentials, HTTP Basic) and the key set its tokens verify with. */
export const tokenRoutes =
  (config: Readonly<SandboxConfig>, signer: TokenSigner): FastifyPluginAsyncZod =>
  async (app) => {
    app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    });

    app.post(
      '/oauth2/token',
      {
        schema: {
          response: { 200: tokenResponse, 400: oauthError, 401: oauthError },
        },
      },
      async (request, reply) => {
        // RFC 6749 5.1: token responses are never cached.
        void reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
        const fail = (status: 400 | 401, error: string, description: string) => {
          if (status === 401) void reply.header('www-authenticate', 'Basic realm="underwriting-sandbox"');
          return reply.code(status).send({ error, error_description: description } satisfies OAuthError);
        };

        const parsed = tokenForm.safeParse(request.body ?? {});
        const isForm = request.headers['content-type']?.startsWith('application/x-www-form-urlencoded') === true;
        const form = isForm && parsed.success ? parsed.data : {};
        const client = await authenticate(request.headers.authorization, form, config);
        if ('refused' in client) {
          request.log.warn(`sandbox: token refused: ${client.refused.error_description}`);
          return fail(client.status, client.refused.error, client.refused.error_description);
        }
        const { clientId } = client;

        if (!isForm || !parsed.success) {
          return fail(400, 'invalid_request', 'send an application/x-www-form-urlencoded body');
        }
        if (!form.grant_type) return fail(400, 'invalid_request', 'grant_type is required');
        if (form.grant_type !== 'client_credentials') {
          return fail(400, 'unsupported_grant_type', 'only client_credentials is supported');
        }
        const scope = form.scope?.trim();
        if (!scope) return fail(400, 'invalid_scope', 'scope is required');

        const accessToken = await signer.sign({ clientId, scope, ttlS: config.tokenTtlS });
        request.log.info({ clientId, scope, expiresIn: config.tokenTtlS }, 'sandbox: token issued');
        return { access_token: accessToken, expires_in: config.tokenTtlS, token_type: 'Bearer' as const };
      },
    );

    app.get(
      '/.well-known/jwks.json',
      { schema: { response: { 200: z.object({ keys: z.array(z.looseObject({ kid: z.string() })) }) } } },
      async () => signer.jwks as { keys: Array<JWK & { kid: string }> },
    );
  };
