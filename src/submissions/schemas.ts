import { z } from 'zod';
import { customerUuidIsCpf } from '../cpf.js';
import { errorSchema, httpStatusSchema, validationErrorSchema } from '../http/errors.js';
import { customerUuidSchema, underwritingRequestSchema } from '../provider/schemas.js';

/** Printable ASCII, 1-200 characters: enough for a UUID or a composite key, bounded for the index. */
export const idempotencyKeySchema = z
  .string()
  .regex(/^[\x20-\x7E]{1,200}$/, 'must be 1-200 printable ASCII characters');

export const submitHeadersSchema = z.looseObject({
  'idempotency-key': idempotencyKeySchema
    .optional()
    .describe('Repeats with the same key and body get the first answer again, without a second provider call (24 h)'),
  prefer: z
    .string()
    .optional()
    .describe('respond-async: store the request as queued and answer 202 at once; it is forwarded when the provider\'s pace allows'),
});

/** True when a Prefer header (RFC 7240: a comma list of preferences, each maybe with parameters) asks for respond-async. */
export function prefersAsync(prefer: string | string[] | undefined): boolean {
  if (prefer === undefined) return false;
  const values = Array.isArray(prefer) ? prefer : [prefer];
  return values.some((v) => v.split(',').some((p) => p.split(';')[0]!.trim().toLowerCase() === 'respond-async'));
}

/**
 * The submit's body: the provider's request, and (unless CUSTOMER_UUID_ALLOW_CPF) a customerUuid
 * that is not a CPF, which would otherwise be logged, stored and pushed in clear.
 */
export function submitBodySchema(allowCpfAsCustomerUuid: boolean) {
  if (allowCpfAsCustomerUuid) return underwritingRequestSchema;
  return underwritingRequestSchema
    .extend({
      customerUuid: customerUuidSchema.refine(
        (v) => !customerUuidIsCpf(v),
        'must not be a CPF (it would be stored and sent in clear): use your own identifier, or set CUSTOMER_UUID_ALLOW_CPF=true if yours are 11-digit numbers',
      ),
    })
    .meta({ id: 'UnderwritingRequest' });
}

export const acceptedSchema = z
  .object({
    customerUuid: z.string(),
    status: z.literal('submitted').describe('The provider has the request; GET shows its stored state'),
    submittedAt: z.iso.datetime(),
    upstreamStatus: httpStatusSchema,
  })
  .describe('The provider accepted the request')
  .meta({ id: 'SubmitAccepted' });

export const queuedSchema = z
  .object({
    customerUuid: z.string(),
    status: z.literal('queued').describe('Stored; forwarded when the provider\'s pace allows. GET shows its state'),
    submittedAt: z.null().describe('Set once it is forwarded (GET shows it)'),
  })
  .describe('Prefer: respond-async: the request is queued (Preference-Applied: respond-async)')
  .meta({ id: 'SubmitQueued' });

const error = (description: string) => errorSchema.describe(description);

export const submitResponses = {
  202: z.union([acceptedSchema, queuedSchema]),
  400: validationErrorSchema.describe('validation_failed: nothing stored, nothing sent'),
  403: error('forbidden: the caller is not in SUBMIT_ALLOWED_IPS'),
  409: error('in_flight: this customerUuid already has a request awaiting its callback'),
  413: error('payload_too_large'),
  415: error('unsupported_media_type'),
  422: error('idempotency_key_reused: the key was used with a different body'),
  502: errorSchema
    .extend({ upstreamStatus: httpStatusSchema.optional().describe("The provider's status, for upstream_rejected") })
    .meta({ id: 'UpstreamErrorBody' })
    .describe('upstream_rejected (the provider answered non-2xx) or upstream_auth_failed (no bearer token)'),
  503: error('storage_unavailable: nothing sent'),
  504: error(
    'upstream_unavailable: the provider was unreachable or did not answer in time, or (with Retry-After, nothing sent) ' +
      "no call to it was possible within the send window: its pace, its Retry-After or an open circuit",
  ),
};
