// One delivery attempt on the wire: the signed POST, read and dropped answer, and why it failed.
import { EventEmitter } from 'node:events';
import { type Agent, request } from 'undici';
import type { EndpointTarget } from './endpoints/registry.js';
import type { AttemptAnswer } from './retry-policy.js';
import { parseRetryAfter } from './retry-policy.js';
import { scrubTarget, type WebhookTarget } from './targets.js';

/** Bytes of a receiver's answer read at most; the rest is dropped with the connection. */
const ANSWER_MAX_BYTES = 16 * 1024;
const ERROR_MAX_CHARS = 300;

/**
 * One attempt's abort signal for undici: a timer, cleared when the attempt ends. AbortSignal.timeout
 * and AbortSignal.any keep every attempt reachable for the whole timeout, so at a backlog's rate
 * (2,000+ a second) they survive young-generation collections and fill the old generation.
 */
export class AttemptSignal extends EventEmitter {
  aborted = false;
  timedOut = false;
}

export function abortAttempt(signal: AttemptSignal, timedOut: boolean): void {
  if (signal.aborted) return;
  signal.aborted = true;
  signal.timedOut = timedOut;
  signal.emit('abort');
}

/** What one attempt sends: the event's id and body, signed at `at`, with the trace's headers. */
export interface Attempt {
  publicId: string;
  body: string;
  at: Date;
  traceHeaders: Record<string, string>;
}

/** POSTs the event to the endpoint (no redirects followed) and says what the receiver answered. */
export async function sendAttempt(
  agent: Agent,
  target: EndpointTarget,
  attempt: Attempt,
  timeoutMs: number,
  signal: AttemptSignal,
): Promise<AttemptAnswer> {
  const { at, body } = attempt;
  let httpStatus: number | null = null;
  let error: string | null = null;
  let retryAfterS: number | undefined;
  try {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': 'underwriting-gateway-events',
      ...target.signer.headers(attempt.publicId, Math.floor(at.getTime() / 1000), body, at.getTime()),
      ...attempt.traceHeaders,
    };
    if (target.authorization) headers.authorization = target.authorization;
    const res = await request(target.url, {
      method: 'POST',
      headers,
      body,
      dispatcher: agent,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    httpStatus = res.statusCode;
    if (httpStatus === 429 || httpStatus === 503) retryAfterS = parseRetryAfter(res.headers['retry-after'], at);
    await res.body.dump({ limit: ANSWER_MAX_BYTES }).catch(() => {});
    if (httpStatus < 200 || httpStatus >= 300) error = `the receiver answered HTTP ${httpStatus}`;
  } catch (err) {
    error = describe(err, target, timeoutMs, signal.timedOut);
  }
  return { httpStatus, error, retryAfterS };
}

/** Why an attempt failed, in a line that names no secret of the URL. */
function describe(err: unknown, target: WebhookTarget, timeoutMs: number, timedOut: boolean): string {
  const e = err as { name?: string; code?: string; message?: string };
  let text: string;
  if (timedOut || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT') text = `timed out after ${timeoutMs} ms`;
  else text = [e?.code, e?.message].filter(Boolean).join(': ') || 'the request failed';
  return scrubTarget(text, target).slice(0, ERROR_MAX_CHARS);
}
