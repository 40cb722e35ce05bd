import { createPrivateKey, type KeyObject, randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { TokenClientConfig } from '../config/config.js';

/**
 * How the client proves who it is to the token endpoint (RFC 6749 §2.3): each strategy adds its
 * part to one token request, freshly for every attempt.
 */
export interface ClientAuthentication {
  /** The OAuth name of the method, for messages (never a secret). */
  readonly method: 'client_secret_basic' | 'private_key_jwt';
  apply(request: { form: URLSearchParams; headers: Record<string, string> }, context: { tokenUrl: string; now: number }): Promise<void>;
}

/** application/x-www-form-urlencoded encoding of one value, as RFC 6749 §2.3.1 requires for Basic. */
export function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/** HTTP Basic with the client id and secret, each form-encoded first (RFC 6749 §2.3.1). */
export function clientSecretBasic(clientId: string, clientSecret: string): ClientAuthentication {
  const basic = `Basic ${Buffer.from(`${formEncode(clientId)}:${formEncode(clientSecret)}`).toString('base64')}`;
  return {
    method: 'client_secret_basic',
    async apply({ headers }) {
      headers.authorization = basic;
    },
  };
}

/**
 * RFC 7523 §2.2: a JWT signed with our private key instead of a secret; iss = sub = the client id,
 * aud = the token URL, a unique jti, valid 60 s.
 */
export function privateKeyJwt(clientId: string, pem: string): ClientAuthentication {
  const key = createPrivateKey({ key: pem, format: 'pem' });
  const alg = signingAlgorithm(key);
  return {
    method: 'private_key_jwt',
    async apply({ form }, { tokenUrl, now }) {
      const iat = Math.floor(now / 1000);
      const assertion = await new SignJWT({})
        .setProtectedHeader({ alg, typ: 'JWT' })
        .setIssuer(clientId)
        .setSubject(clientId)
        .setAudience(tokenUrl)
        .setJti(randomUUID())
        .setIssuedAt(iat)
        .setExpirationTime(iat + 60)
        .sign(key);
      form.set('client_id', clientId);
      form.set('client_assertion_type', 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer');
      form.set('client_assertion', assertion);
    },
  };
}

/** The configured method: with both a secret and a key, the signed assertion wins. */
export function clientAuthentication(config: TokenClientConfig): ClientAuthentication {
  if (config.assertionKey !== undefined) return privateKeyJwt(config.clientId, config.assertionKey);
  if (config.clientSecret !== undefined) return clientSecretBasic(config.clientId, config.clientSecret);
  throw new Error('the token client needs a client secret or a client assertion key');
}

function signingAlgorithm(key: KeyObject): 'RS256' | 'ES256' {
  if (key.asymmetricKeyType === 'rsa') return 'RS256';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  throw new Error('CLIENT_ASSERTION_KEY must be an RSA or a P-256 EC private key');
}
