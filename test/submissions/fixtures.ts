import type { LightMyRequestResponse as Response } from 'fastify';
import type { Test } from 'tap';
import type { DatabaseHandle } from '../../src/db/handle.js';
import type { BearerTokenSource } from '../../src/provider/token-source.js';
import type { UnderwritingRequest } from '../../src/provider/schemas.js';
import { keyDigester } from '../../src/requests/key-digest.js';
import { buildTestApp, TEST_CPF_HASH_KEY, type TestAppOptions } from '../helpers/app.js';
import { accept, type FakeProvider, type ProviderHandler, startFakeProvider } from './provider.js';

export const CPF = '52998224725';
export const PROVIDER_PATH = '/api/partner/credit/cards/underwritings';

export function validRequest(overrides: Partial<UnderwritingRequest> = {}): UnderwritingRequest {
  return {
    customerUuid: 'c0ffee00-1234-4abc-8def-000000000001',
    cpf: CPF,
    costSavingEnabled: false,
    srd: {
      grossIncome: 8500.5,
      housingSpends: 2100,
      cardSpends: 900,
      loanSpends: 0,
      address: { street: 'Rua das Flores', number: '42', complement: 'apto 3', city: 'São Paulo', state: 'SP' },
      occupation: 'Company Employee',
      desiredCreditLimit: 5000,
    },
    ...overrides,
  };
}

export interface SubmitGateway extends Awaited<ReturnType<typeof buildTestApp>> {
  provider: FakeProvider;
  submit(body: unknown, headers?: Record<string, string>): Promise<Response>;
}

/** The gateway on a fresh database, forwarding to a fake provider that answers with the handler. */
export async function submitGateway(
  t: Test,
  options: TestAppOptions & { handler?: ProviderHandler; tokenSource?: BearerTokenSource } = {},
): Promise<SubmitGateway> {
  const provider = await startFakeProvider(t, options.handler ?? accept);
  const gw = await buildTestApp(t, { ...options, env: { PROVIDER_BASE_URL: provider.url, ...options.env } });
  return {
    ...gw,
    provider,
    submit: (body, headers = {}) =>
      gw.app.inject({
        method: 'POST',
        url: '/v1/underwritings',
        headers: { 'content-type': 'application/json', ...headers },
        payload: typeof body === 'string' ? body : JSON.stringify(body),
      }),
  };
}

export async function storedRequests(database: DatabaseHandle) {
  return database.db.selectFrom('underwriting_requests').selectAll().orderBy('id').execute();
}

export async function storedKeys(database: DatabaseHandle) {
  return database.db.selectFrom('idempotency_keys').selectAll().orderBy('created_at').execute();
}

const digests = keyDigester([TEST_CPF_HASH_KEY]);

/** An Idempotency-Key as the gateway stores it (its digest: src/requests/key-digest.ts), under the tests' CPF_HASH_KEY. */
export const keyAsStored = (key: string): string => digests.digest(key);
