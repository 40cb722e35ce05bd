import { Ajv2020 as Ajv, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';

// Every answer the tests provoke is checked against the OpenAPI document the gateway serves at
// /docs/json: its status must be documented for that operation, and its body must validate (ajv)
// against the schema documented for that status and content type. buildTestApp turns it on.

// ajv-formats is CommonJS; under ESM its function is the default export's default.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

type Json = any;

/** A schema with its $ref (if any) followed once, for tests that look inside a documented schema. */
export function dereference(doc: Json, schema: Json): Json {
  const ref: unknown = schema?.$ref;
  if (typeof ref !== 'string') return schema;
  return ref
    .replace(/^#\//, '')
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((node: Json, key) => node?.[key], doc);
}

export interface AnswerToCheck {
  method: string;
  /** The route's template as Fastify has it: /v1/underwritings/:customerUuid */
  route: string;
  status: number;
  contentType: string | undefined;
  body: string;
}

export interface ResponseChecker {
  /** Problems with one answer (empty when it matches the document); undefined when the route is not a documented operation. */
  check(answer: AnswerToCheck): string[] | undefined;
}

/** OpenAPI's path template of a Fastify route: /v1/underwritings/:customerUuid -> /v1/underwritings/{customerUuid} */
export const openapiPath = (route: string): string => route.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

const checkers = new Map<string, ResponseChecker>();

/** Whether a value validates against a schema of the document (its references resolved within it). */
export function schemaValidator(doc: Json): { accepts(schema: Json, value: unknown): boolean } {
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  return { accepts: (schema, value) => ajv.validate({ allOf: [schema], components: doc.components }, value) as boolean };
}

/** A checker for one document (cached: every app of a test file serves the same one). */
export function responseChecker(doc: Json): ResponseChecker {
  const key = JSON.stringify(doc);
  const cached = checkers.get(key);
  if (cached) return cached;
  // OpenAPI 3.1 schemas are JSON Schema 2020-12; `example` and the like are not ajv's keywords (strict off).
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  const validators = new Map<string, ValidateFunction>();
  const checker: ResponseChecker = {
    check({ method, route, status, contentType, body }) {
      const op = doc.paths?.[openapiPath(route)]?.[method.toLowerCase()];
      if (!op?.operationId) return undefined;
      const where = `${method} ${route} answered ${status}`;
      const code = String(status);
      const documented = op.responses?.[code] ?? op.responses?.[`${code[0]}XX`] ?? op.responses?.default;
      if (!documented) return [`${where}, a status its operation ${op.operationId} does not document (${Object.keys(op.responses ?? {}).join(', ')})`];
      const content: Record<string, { schema?: Json }> = documented.content ?? {};
      if (Object.keys(content).length === 0) return body.length === 0 ? [] : [`${where} with a body; the document declares none`];
      const actual = (contentType ?? '').split(';').map((p) => p.trim().toLowerCase());
      const mediaType = Object.keys(content).find((declared) => {
        const [type, ...params] = declared.split(';').map((p) => p.trim().toLowerCase());
        return type === actual[0] && params.every((p) => actual.includes(p));
      });
      if (!mediaType) return [`${where} as ${contentType}; the document declares ${Object.keys(content).join(', ')}`];
      const schema = content[mediaType]!.schema;
      if (!schema) return [];
      if (!mediaType.includes('json')) return schema.type === 'string' ? [] : [`${where} as ${mediaType}, but its schema is not a string`];
      let data: unknown;
      try {
        data = JSON.parse(body);
      } catch {
        return [`${where}: the body is not JSON`];
      }
      const id = `${openapiPath(route)} ${method} ${code} ${mediaType}`;
      let validate = validators.get(id);
      if (!validate) {
        // The schema's references (#/components/schemas/...) resolve within this root.
        validate = ajv.compile({ allOf: [schema], components: doc.components });
        validators.set(id, validate);
      }
      if (validate(data)) return [];
      return (validate.errors ?? []).map((e) => `${where}: ${e.instancePath || '(body)'} ${e.message} (${e.schemaPath}) in ${body.slice(0, 300)}`);
    },
  };
  checkers.set(key, checker);
  return checker;
}

/**
 * An onSend hook (it sees every answer: injected ones and real HTTP ones) checking each answer
 * of a documented operation against the served document; a mismatch fails the test.
 */
export function checkAnswersAgainstDocument(t: Test, app: FastifyInstance): void {
  let checker: ResponseChecker | undefined;
  app.addHook('onSend', async (request, reply, payload) => {
    const route = request.routeOptions.url;
    if (route === undefined || route.startsWith('/docs')) return payload;
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : payload == null ? '' : undefined;
    if (body === undefined) return payload; // a stream: files, not API answers
    checker ??= responseChecker(JSON.parse(JSON.stringify(app.swagger())));
    const problems = checker.check({ method: request.method, route, status: reply.statusCode, contentType: reply.getHeader('content-type')?.toString(), body });
    for (const problem of problems ?? []) t.fail(`the answer matches /docs/json: ${problem}`);
    return payload;
  });
}
