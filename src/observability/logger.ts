import { isIP } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { type Logger, type LoggerOptions, pino } from 'pino';
import pinoPretty from 'pino-pretty';
import type { LogFormat } from '../config/env.js';
import { maskCpfsInText } from '../cpf.js';
import { percentDecoded, REDACTED, scrubText } from './scrub.js';

export { REDACTED } from './scrub.js';

/** The query parameters the gateway's routes take: only these names are logged as they are. */
const KNOWN_QUERY_PARAMS = new Set([
  'token', 'wait', 'status', 'decision', 'since', 'until', 'limit', 'cursor', 'after', 'type', 'customerUuid', 'action', 'bucket', 'kind',
]);

function decoded(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, ' '));
  } catch {
    return part;
  }
}

/** Splits a URL into its path and its query's (name, value) pairs, separated by & or ;, names decoded. */
function splitUrl(url: string): { path: string; params: Array<{ name: string; raw: string }> } {
  const hash = url.indexOf('#');
  const withoutFragment = hash === -1 ? url : url.slice(0, hash);
  const mark = withoutFragment.indexOf('?');
  if (mark === -1) return { path: withoutFragment, params: [] };
  const params = withoutFragment
    .slice(mark + 1)
    .split(/[&;]/)
    .filter((p) => p !== '')
    .map((raw) => {
      const eq = raw.indexOf('=');
      return { name: decoded(eq === -1 ? raw : raw.slice(0, eq)), raw };
    });
  return { path: withoutFragment.slice(0, mark), params };
}

/**
 * A path segment that reads as a credential: 16 or more letters, digits, `-` and `_`, letters and
 * digits both, as the token of a Slack, Teams or Discord webhook URL (`/services/T0/B0/<token>`).
 * A UUID is one too (webhook.site's URLs are their secret); a word or a short id is not.
 */
export function isTokenSegment(segment: string): boolean {
  return segment.length >= 16 && /^[A-Za-z0-9_-]+$/.test(segment) && /[A-Za-z]/.test(segment) && /[0-9]/.test(segment);
}

/**
 * A URL safe to log and to show: userinfo dropped, every query value (and the fragment) hidden, a
 * bare query word (`?s3cr3t`, a value without a name), every path parameter's value
 * (`;jsessionid=…`) and every path segment that reads as a token (isTokenSegment) too, and a CPF
 * in the path or in the host name masked.
 */
export function redactUrl(raw: string): string {
  const u = new URL(raw);
  const path = maskCpfsInText(
    u.pathname
      .replace(/;[^/]*/g, ';redacted')
      .split('/')
      .map((segment) => (isTokenSegment(segment) ? 'redacted' : segment))
      .join('/'),
  );
  const names = u.search
    .slice(1)
    .split('&')
    .filter((part) => part !== '')
    .map((part) => (part.includes('=') ? `${encodeURIComponent(maskCpfsInText(new URLSearchParams(part).keys().next().value ?? ''))}=redacted` : 'redacted'));
  const shown = `${shownOrigin(u)}${path}`;
  return names.length === 0 ? shown : `${shown}?${[...new Set(names)].join('&')}`;
}

/** A URL's host name as shown: a CPF in it masked; an IP address is an address, never read as a CPF. */
export function shownHostname(u: URL): string {
  return u.hostname.startsWith('[') || isIP(u.hostname) !== 0 ? u.hostname : maskCpfsInText(u.hostname);
}

function shownOrigin(u: URL): string {
  return u.origin === 'null' ? u.origin : `${u.protocol}//${shownHostname(u)}${u.port === '' ? '' : `:${u.port}`}`;
}

/**
 * What a request log line says about a URL from outside: its path and the names of its query
 * parameters, never their values (a secret or a CPF may hide in any encoding of them); a name the
 * gateway does not take is shown as "…", since it may itself be a secret or a CPF.
 */
export function loggedRequestUrl(url: string, secrets: ReadonlyArray<string | undefined> = []): string {
  const { path, params } = splitUrl(url);
  const shown = shownPath(path, secrets);
  if (params.length === 0) return shown;
  return `${shown}?${params.map(({ name }) => (KNOWN_QUERY_PARAMS.has(name) ? name : '…')).join('&')}`;
}

/**
 * A request's path fit to log: a path parameter's value (`;token=…`, or `&token=…` where a `?` was
 * forgotten) hidden, as redactUrl does, and CPF-like runs and secrets scrubbed in the path as
 * percent-decoded too (`529%2E982%2E247%2D25`, `%EF%BC%95…`), so no encoding hides one. The path is
 * shown decoded only when decoding revealed something to scrub.
 */
function shownPath(path: string, secrets: ReadonlyArray<string | undefined>): string {
  const raw = path.replace(/([;&])[^/]*/g, '$1redacted');
  const plain = percentDecoded(raw);
  const scrubbedPlain = scrubText(plain, secrets);
  // Shown decoded, a decoded ? or # would read as the start of a query or a fragment: kept encoded.
  return scrubbedPlain !== plain ? scrubbedPlain.replace(/[?#]/g, encodeURIComponent) : scrubText(raw, secrets);
}

/** An error as logged: its type, code and message and stack scrubbed; never a driver's detail fields (values). */
function serializeError(err: unknown, secrets: readonly string[] = []): Record<string, unknown> {
  if (!(err instanceof Error)) {
    // Much of the code logs `err: { message }` (the message alone, never a driver's fields): keep it,
    // rather than String() of the object ("[object Object]"), which hid every such message.
    const message = (err as { message?: unknown } | null)?.message;
    return { message: scrubText(typeof message === 'string' ? message : String(err), secrets) };
  }
  const code = (err as { code?: unknown }).code;
  return {
    type: err.name,
    message: scrubText(err.message, secrets),
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
    ...(err.stack ? { stack: scrubText(err.stack, secrets) } : {}),
  };
}

// A CPF can appear in any object we log (a body, an error's details): redact it at every depth we log.
const cpfPaths = ['cpf', '*.cpf', '*.*.cpf', '*.*.*.cpf', '*.*.*.*.cpf'];
const secretPaths = [
  'req.headers.authorization',
  'req.headers["x-partner-auth"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-partner-auth"]',
  '*.headers.authorization',
  '*.headers["x-partner-auth"]',
  'partnerToken',
  '*.partnerToken',
  'clientSecret',
  '*.clientSecret',
  'callbackSecret',
  '*.callbackSecret',
  'access_token',
  '*.access_token',
  'token',
  '*.token',
  'assertionKey',
  '*.assertionKey',
  'client_assertion',
  '*.client_assertion',
];

interface SerializableRequest {
  id?: string;
  method?: string;
  url?: string;
  ip?: string;
  socket?: { remoteAddress?: string; remotePort?: number };
}

/** Where a request's logger keeps its request id (inherited by its own children). */
const REQUEST_ID = Symbol('requestId');
type WithRequestId = { [REQUEST_ID]?: unknown };

/**
 * Fastify's per-request logger, without per-request bindings: pino runs every binding through the
 * wildcard redaction paths as the child is made, which was a tenth of what a request allocated
 * even when nothing was logged. The id is added to the lines actually written, by the mixin below
 * (and redacted with them).
 */
export function requestLoggerFactory(
  logger: FastifyBaseLogger,
  bindings: Parameters<FastifyBaseLogger['child']>[0],
  options: Parameters<FastifyBaseLogger['child']>[1],
): FastifyBaseLogger {
  const { reqId, ...others } = bindings;
  const child = logger.child(others, options);
  (child as WithRequestId)[REQUEST_ID] = reqId;
  return child;
}

/**
 * pino options shared by the gateway, the sandbox and the CLIs. Lines carry `time` as ISO 8601 and
 * `level` as its name ("warn"), which log collectors (Datadog, Elastic, Loki) read as they are.
 */
export function loggerOptions(level: string, secrets: readonly string[] = []): LoggerOptions {
  return {
    level,
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin: (_object, _level, logger) => {
      const reqId = (logger as WithRequestId)[REQUEST_ID];
      return reqId === undefined ? {} : { reqId };
    },
    redact: { paths: [...secretPaths, ...cpfPaths], censor: REDACTED },
    serializers: {
      req: (req: SerializableRequest) => ({
        id: req.id,
        method: req.method,
        url: req.url === undefined ? undefined : loggedRequestUrl(req.url, secrets),
        peer: req.socket?.remoteAddress,
        client: req.ip,
      }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
      err: (err: unknown) => serializeError(err, secrets),
    },
  };
}

/** JSON for machines; readable lines only where a person is watching: development, on a terminal. */
export function defaultLogFormat(nodeEnv: string | undefined, isTerminal: boolean): LogFormat {
  return nodeEnv !== 'production' && nodeEnv !== 'test' && isTerminal ? 'pretty' : 'json';
}

/** A field whose line the pretty form prints as a banner above the message (JSON keeps it as a field). */
export const BANNER_FIELD = 'banner';

/** pino-pretty's options. */
const PRETTY_OPTIONS = {
  translateTime: 'SYS:HH:MM:ss.l',
  ignore: `pid,hostname,${BANNER_FIELD}`,
  messageFormat: `{if ${BANNER_FIELD}}\n{${BANNER_FIELD}}\n{end}{msg}`,
};

/**
 * The process's logger: JSON lines, or readable lines (pino-pretty) when the format is pretty. fd is
 * where the lines go (1 stdout, 2 stderr). secrets (configuredSecrets) are scrubbed from every logged
 * request path and error message: the lines a request or an error writes name none of them.
 *
 * pino-pretty runs as a stream in this thread, written synchronously, not as pino's transport (a
 * worker thread): at exit pino waits for a transport to drain, and a transport whose pipe was closed
 * (`npm start | head`) never drains, so every exit took the 10 s of its flush timeouts and a
 * SIGTERM outlived the shutdown's grace (test/log-format.test.ts).
 */
export function createLogger(level: string, format: LogFormat, fd: 1 | 2 = 1, secrets: readonly string[] = []): Logger {
  const options = loggerOptions(level, secrets);
  if (format === 'pretty') return pino(options, pinoPretty({ ...PRETTY_OPTIONS, destination: fd, sync: true }));
  return fd === 2 ? pino(options, pino.destination(2)) : pino(options);
}

/**
 * Node's process warnings (a dependency's deprecation or security notice: node-postgres warns of
 * every DATABASE_URL with sslmode=require) go to the log, in JSON format, as one warn line each,
 * instead of Node's own printout: several lines of free text on stderr, which a collector reading
 * the output as JSON lines cannot parse. Node prints them through a 'warning' listener of its own,
 * which this replaces; in the pretty format Node's printout stays (a person reads it). The
 * message is scrubbed of the configured secrets, as every logged error is.
 */
export function logProcessWarnings(log: Logger, format: LogFormat, secrets: readonly string[] = []): void {
  if (format !== 'json') return;
  process.removeAllListeners('warning');
  process.on('warning', (warning: Error & { code?: unknown }) => {
    const code = typeof warning.code === 'string' ? warning.code : undefined;
    log.warn({ warning: warning.name, ...(code ? { code } : {}) }, scrubText(warning.message, secrets));
  });
}
