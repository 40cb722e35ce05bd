import { z } from 'zod';
import { AUDIT_ACTIONS } from '../db/types.js';
import { eventView } from '../events/schemas.js';
import { cpfSchema, customerUuidSchema } from '../provider/schemas.js';
import { pageOf } from '../http/page.js';
import { cursorParam, instant, orderedWindow, wholeNumber } from '../http/query.js';
import { requestView, resultView } from '../requests/schemas.js';

export const MAX_AUDIT_PAGE = 500;
export const DEFAULT_AUDIT_PAGE = 50;

/** A subject: by CPF (sent only in a body, never in a URL) or by customerUuid, exactly one of them. */
export const subjectBody = z
  .strictObject({
    cpf: cpfSchema.optional().describe('The CPF, 11 digits'),
    customerUuid: customerUuidSchema.optional(),
  })
  .superRefine((body, ctx) => {
    if ((body.cpf === undefined) === (body.customerUuid === undefined)) {
      ctx.addIssue({ code: 'custom', path: [], message: 'give exactly one of cpf or customerUuid' });
    }
  })
  .describe('{cpf} or {customerUuid}')
  .meta({ id: 'DataSubject' });
export type SubjectBody = z.infer<typeof subjectBody>;

const exportedRequest = requestView.extend({
  updatedAt: z.iso.datetime(),
  upstreamError: z.string().nullable().describe("What the provider said when it refused, or why it could not be reached"),
  idempotencyKey: z.string().nullable().describe('The Idempotency-Key as stored: its keyed digest (§ and 43 base64url characters); the key as sent only for a request a version before digests stored, until rewritten; null without one'),
});

const exportedUnmatched = z.object({
  customerUuid: z.string(),
  receivedAt: z.iso.datetime(),
  result: resultView.nullable(),
});

const exportedInvalid = z.object({
  customerUuid: z.string().nullable(),
  receivedAt: z.iso.datetime(),
  error: z.string().nullable().describe('Why it was refused'),
  body: z.unknown().describe('The body as parsed JSON, when it was JSON'),
  rawBody: z.string().describe('The bytes as stored, read as UTF-8: as received, with every CPF in them masked'),
});

export const exportView = z
  .object({
    customerUuids: z.array(z.string()).describe("The subject's customerUuids"),
    requests: z.array(exportedRequest).describe('Every request, newest first, each with its srd and result'),
    unmatched: z.array(exportedUnmatched).describe('Callbacks that matched no request'),
    invalid: z.array(exportedInvalid).describe('Callbacks refused as invalid that name the subject'),
    events: z.array(eventView).describe('Outcome events about the subject, newest first, each with its deliveries'),
  })
  .describe('Everything stored about the subject; CPF-like digit runs in free text are redacted')
  .meta({ id: 'PersonalDataExport' });
export type ExportView = z.infer<typeof exportView>;

export const erasedView = z.object({
  erased: z.object({
    requests: z.number().int(),
    callbacks: z.number().int(),
    events: z.number().int(),
  }),
}).meta({ id: 'ErasureResult' });

export const auditQuery = orderedWindow(z.strictObject({
  since: instant.optional().describe('entries at or after this instant'),
  until: instant.optional().describe('entries before this instant'),
  action: z.enum(AUDIT_ACTIONS).optional(),
  limit: wholeNumber(1, MAX_AUDIT_PAGE)
    .optional()
    .describe(`Page size, 1-${MAX_AUDIT_PAGE} (default ${DEFAULT_AUDIT_PAGE})`),
  cursor: cursorParam.optional(),
}));

export const auditEntryView = z.object({
  at: z.iso.datetime(),
  action: z.enum(AUDIT_ACTIONS),
  actor: z.string().describe("key:<first 12 hex digits of the key's SHA-256>, or peer:<address> for lookups without keys"),
  subject: z.string().describe('A keyed hash of the CPF (cpf:…) or customerUuid (customer:…) asked about, or the endpoint changed (endpoint:ep_…)'),
  counts: z.record(z.string(), z.number()),
}).meta({ id: 'AuditEntry' });

export const auditPageView = pageOf(auditEntryView).meta({ id: 'AuditPage' });
