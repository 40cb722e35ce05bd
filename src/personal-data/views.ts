import { maskCpfsInText } from '../cpf.js';
import { eventView } from '../events/feed.js';
import { submittedAtView } from '../requests/schemas.js';
import { redactCpfLike } from '../stats/mask.js';
import type { ExportView } from './schemas.js';
import type { Stored } from './sql.js';

/** A CPF written any usual way, not part of a longer run of digits. */
const CPF_LIKE = /(?<!\d)\d{3}\.?\d{3}\.?\d{3}-?\d{2}(?!\d)/g;
const REDACTED = '[redacted]';

/** Keys whose values are the subject's own identifiers, returned as they are (a customerUuid is not a CPF: refused at the door). */
const SUBJECT_KEYS = new Set(['customerUuid', 'customerUuids']);
/**
 * Keys whose values are identifiers (an event's time-ordered id, a key a client chose): their long
 * runs of digits (a UUID's) are no CPF, so only a run whose check digits hold is masked there.
 */
const IDENTIFIER_KEYS = new Set(['id', 'idempotencyKey']);

/**
 * An export never carries a full CPF: every string but a customerUuid (the subject's own
 * identifier) loses its CPF-like digit runs, and the CPF asked about goes in any form. Free text
 * (a raw body, its JSON copy, an error) may write a CPF spaced, fullwidth or escaped (\u0035...,
 * %35..., &#53;...): the wider rule of the callbacks' view; an identifier loses only a valid CPF,
 * in any of the ways one may be typed (maskCpfsInText).
 */
export function redactCpfs<T>(value: T, cpf: string | undefined): T {
  const strict = (text: string) => (cpf ? text.split(cpf).join(REDACTED) : text).replace(CPF_LIKE, REDACTED);
  const clean = (text: string) => redactCpfLike(strict(text), REDACTED);
  const walk = (v: unknown, key: string | undefined): unknown => {
    if (typeof v === 'string') {
      if (key !== undefined && SUBJECT_KEYS.has(key)) return v;
      return key !== undefined && IDENTIFIER_KEYS.has(key) ? maskCpfsInText(strict(v)) : clean(v);
    }
    // An array's items are what its key names (customerUuids: each a customerUuid).
    if (Array.isArray(v)) return v.map((item) => walk(item, key));
    if (v !== null && typeof v === 'object' && !(v instanceof Date)) {
      // fromEntries defines own properties, so a "__proto__" key stays data, never a prototype.
      return Object.fromEntries(Object.entries(v).map(([k, item]) => [clean(k), walk(item, k)]));
    }
    return v;
  };
  return walk(value, undefined) as T;
}

export function exportView(stored: Stored, customerUuids: string[], cpf: string | undefined): ExportView {
  const view: ExportView = {
    customerUuids,
    requests: stored.requests.map((r) => ({
      customerUuid: r.customer_uuid,
      status: r.status,
      decision: r.decision,
      cpfMasked: r.cpf_masked,
      costSavingEnabled: r.cost_saving_enabled,
      srd: r.srd as ExportView['requests'][number]['srd'],
      submittedAt: submittedAtView(r.status, r.submitted_at),
      updatedAt: r.updated_at.toISOString(),
      completedAt: r.completed_at ? r.completed_at.toISOString() : null,
      upstreamStatus: r.upstream_status,
      upstreamError: r.upstream_error,
      idempotencyKey: r.idempotency_key,
      result: r.result as ExportView['requests'][number]['result'],
    })),
    unmatched: stored.callbacks
      .filter((c) => c.outcome === 'unmatched')
      .map((c) => ({
        customerUuid: c.customer_uuid ?? '',
        receivedAt: c.received_at.toISOString(),
        result: c.body as ExportView['unmatched'][number]['result'],
      })),
    invalid: stored.callbacks
      .filter((c) => c.outcome === 'invalid')
      .map((c) => ({
        customerUuid: c.customer_uuid,
        receivedAt: c.received_at.toISOString(),
        error: c.error,
        body: c.body ?? null,
        rawBody: Buffer.from(c.raw_body).toString('utf8'),
      })),
    events: stored.events.map(eventView),
  };
  return redactCpfs(view, cpf);
}
