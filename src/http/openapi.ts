import type { SwaggerOptions } from '@fastify/swagger';
import { createJsonSchemaTransformObject, jsonSchemaTransform } from 'fastify-type-provider-zod';

// The OpenAPI document (/docs/json) is generated from the routes' zod schemas. This module holds
// the conventions every route follows and the pass that makes the generated document one that
// validators (ajv) and client generators (openapi-typescript) read as meant. It is OpenAPI 3.1
// (fastify-type-provider-zod then emits JSON Schema 2020-12: null is a type, not `nullable`).
//
// Every documented route spreads `operation(<operationId>, <access>)` into its schema:
//   schema: { ...operation('getUnderwriting', 'query'), tags: [...], summary: ..., response: {...} }
// test/openapi/conventions.test.ts fails for a route without an operationId or a security declaration.
// Schemas worth a name in generated clients get one with zod's `.meta({ id: 'Name' })`.

/** Who may call a route, beyond the address allowlists (which OpenAPI cannot express). */
export type Access =
  /** Anyone who can reach the port (operations routes) or whose address is allowlisted (submit). */
  | 'open'
  /** The query routes: `Authorization: Bearer` with one of QUERY_API_KEYS, when it is set. */
  | 'query'
  /** Administrative routes: `Authorization: Bearer` with one of ADMIN_API_KEYS. */
  | 'admin'
  /** The provider's callback: `?token=` with CALLBACK_SECRET, when it is set. */
  | 'callback';

export const SECURITY_SCHEMES = {
  queryKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'One of QUERY_API_KEYS. Required only when QUERY_API_KEYS is set; a missing or wrong key is 401.',
  },
  adminKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'One of ADMIN_API_KEYS, for the administrative routes.',
  },
  callbackToken: {
    type: 'apiKey',
    in: 'query',
    name: 'token',
    description: 'CALLBACK_SECRET, in the callback URL registered with the provider. Required only when CALLBACK_SECRET is set.',
  },
} as const;

type SecurityRequirement = Partial<Record<keyof typeof SECURITY_SCHEMES, string[]>>;

// `{}` as an alternative says the credential is optional: it is demanded only when configured.
const SECURITY: Record<Access, SecurityRequirement[]> = {
  open: [],
  query: [{ queryKey: [] }, {}],
  admin: [{ adminKey: [] }],
  callback: [{ callbackToken: [] }, {}],
};

/** The two things every documented route declares: a stable operationId (a generated client's method name) and its security. */
export function operation(operationId: string, access: Access): { operationId: string; security: SecurityRequirement[] } {
  return { operationId, security: SECURITY[access] };
}

/** What a response status means when the route gave no description of its own. */
const STATUS_DESCRIPTIONS: Record<string, string> = {
  200: 'OK',
  400: 'validation_failed: the request is not valid (issues say where)',
  401: 'unauthorized: missing or wrong credentials',
  403: 'forbidden: the caller is not in the allowlist of this route',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large: the request body is too large',
  415: 'unsupported_media_type: send the body as application/json',
  503: 'storage_unavailable: the database is unreachable; try again shortly',
};

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };
const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

const STRING_ONLY = ['pattern', 'minLength', 'maxLength', 'format'];

/**
 * One schema object (OpenAPI 3.1: JSON Schema 2020-12, where null is a type), fixed in place:
 * - a described reference (zod gives `{description, allOf: [{$ref}]}`) becomes `{$ref, description}`,
 *   which 3.1 allows: generators then use the named model instead of an anonymous wrapper;
 * - a schema documented as a number (`.meta({ type: 'integer' })` on a query parameter that is text
 *   on the wire) keeps no string keywords from the text it is parsed from;
 * - zod's bounds of a bare `.int()` (±2^53-1) say nothing and become absurd examples: gone (a
 *   number with a real range says so in its zod schema, e.g. httpStatusSchema);
 * - an `anyOf` left with one branch (zod drops branches it cannot represent) is that branch.
 */
function fixSchema(schema: JsonObject): void {
  if (Array.isArray(schema.allOf) && schema.allOf.length === 1 && isObject(schema.allOf[0]) && typeof schema.allOf[0].$ref === 'string' && Object.keys(schema.allOf[0]).length === 1) {
    const others = Object.keys(schema).filter((key) => key !== 'allOf');
    if (others.every((key) => key === 'description')) {
      schema.$ref = schema.allOf[0].$ref;
      delete schema.allOf;
    }
  }
  if (schema.type === 'integer' || schema.type === 'number') for (const key of STRING_ONLY) delete schema[key];
  if (schema.minimum === -Number.MAX_SAFE_INTEGER) delete schema.minimum;
  if (schema.maximum === Number.MAX_SAFE_INTEGER) delete schema.maximum;
  if (Array.isArray(schema.anyOf) && schema.anyOf.length === 1 && isObject(schema.anyOf[0])) {
    const [only] = schema.anyOf as [JsonObject];
    delete schema.anyOf;
    for (const [key, value] of Object.entries(only)) if (!(key in schema)) schema[key] = value;
    fixSchema(schema);
  }
}

const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf'];
const SUBSCHEMAS = ['items', 'additionalProperties', 'not'];

function walkSchema(schema: Json, visit: (s: JsonObject) => void): void {
  if (!isObject(schema)) return;
  visit(schema);
  if (isObject(schema.properties)) for (const child of Object.values(schema.properties)) walkSchema(child, visit);
  for (const key of SUBSCHEMAS) walkSchema(schema[key] ?? null, visit);
  for (const key of SUBSCHEMA_LISTS) {
    const list = schema[key];
    if (Array.isArray(list)) for (const child of list) walkSchema(child, visit);
  }
}

/** Every schema slot of the document: parameters, bodies, responses, components. */
function* schemaSlots(doc: JsonObject): Generator<{ holder: JsonObject; key: string }> {
  const components = isObject(doc.components) && isObject(doc.components.schemas) ? doc.components.schemas : {};
  for (const key of Object.keys(components)) yield { holder: components, key };
  for (const item of Object.values(isObject(doc.paths) ? doc.paths : {})) {
    if (!isObject(item)) continue;
    for (const op of Object.values(item)) {
      if (!isObject(op)) continue;
      for (const parameter of Array.isArray(op.parameters) ? op.parameters : []) {
        if (isObject(parameter) && isObject(parameter.schema)) yield { holder: parameter, key: 'schema' };
      }
      const bodies = [op.requestBody, ...Object.values(isObject(op.responses) ? op.responses : {})];
      for (const body of bodies) {
        if (!isObject(body) || !isObject(body.content)) continue;
        for (const media of Object.values(body.content)) if (isObject(media) && isObject(media.schema)) yield { holder: media, key: 'schema' };
      }
    }
  }
}

const REF = '#/components/schemas/';
const ERROR_BODY = 'ErrorBody';
const VALIDATION_ERROR_BODY = 'ValidationErrorBody';

/**
 * What the server may answer on any operation besides the route's own statuses, in the contract's
 * error body: Node's and Fastify's refusals before a route runs (errors.ts: answerClientError,
 * frameworkErrorReply), and the error handler's own.
 */
const COMMON_RESPONSES: Array<{ status: string; description: string; applies: (path: string, method: string, op: JsonObject) => boolean; schema: string }> = [
  { status: '400', description: 'validation_failed: the request could not be read or is not valid', applies: () => true, schema: VALIDATION_ERROR_BODY },
  { status: '408', description: 'request_timeout: the request line, headers or body did not arrive in time', applies: () => true, schema: ERROR_BODY },
  { status: '413', description: 'payload_too_large: the request body is too large', applies: (_, method) => BODY_METHODS.has(method), schema: ERROR_BODY },
  { status: '414', description: 'uri_too_long: a path parameter is too long', applies: (path) => path.includes('{'), schema: ERROR_BODY },
  { status: '415', description: 'unsupported_media_type: send the body as application/json', applies: (_, method, op) => BODY_METHODS.has(method) && !READS_ANY_CONTENT_TYPE.has(String(op.operationId)), schema: ERROR_BODY },
  { status: '431', description: 'headers_too_large: the request line or headers are too large', applies: () => true, schema: ERROR_BODY },
  { status: '500', description: 'internal_error: something went wrong on our side', applies: () => true, schema: ERROR_BODY },
];
/** Operations that read any content type as bytes (callbacks/routes.ts: a callback is kept whatever it is): never 415. */
const READS_ANY_CONTENT_TYPE = new Set(['receiveUnderwritingCallback']);
/** Methods whose bodies Fastify reads: their size and content type can be refused. */
const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);

function referencedComponents(doc: JsonObject): Set<string> {
  const found = new Set<string>();
  JSON.stringify(doc, (key, value: unknown) => {
    if (key === '$ref' && typeof value === 'string' && value.startsWith(REF)) found.add(value.slice(REF.length));
    return value;
  });
  return found;
}

function renameRefs(value: Json, from: string, to: string): void {
  if (Array.isArray(value)) for (const v of value) renameRefs(v, from, to);
  else if (isObject(value)) {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && child === `${REF}${from}`) value[key] = `${REF}${to}`;
      else renameRefs(child, from, to);
    }
  }
}

/** Whether a request body's JSON schema takes null (a zod `.nullish()` body). */
function admitsNull(body: JsonObject): boolean {
  const media = isObject(body.content) ? body.content['application/json'] : undefined;
  const schema = isObject(media) ? media.schema : undefined;
  return isObject(schema) && Array.isArray(schema.anyOf) && schema.anyOf.some((s) => isObject(s) && s.type === 'null');
}

const withoutDescription = (schema: JsonObject): string => JSON.stringify({ ...schema, description: undefined });

/**
 * The whole document, finished: schemas fixed (fixSchema), copies of a named schema that zod
 * inlined (a `.describe()`d clone, say) pointed at the named one, only the components that are
 * used, named without the `Input` suffix when there is no output schema of that name, and every
 * response described.
 */
export function finishDocument(doc: JsonObject): JsonObject {
  const components = (isObject(doc.components) ? doc.components : (doc.components = {})) as JsonObject;
  const schemas = (isObject(components.schemas) ? components.schemas : (components.schemas = {})) as JsonObject;

  for (const { holder, key } of schemaSlots(doc)) walkSchema(holder[key] ?? null, fixSchema);

  // Relink: a slot holding exactly a named schema (bar its description) becomes a reference to it.
  const named = new Map<string, string>();
  for (const [name, schema] of Object.entries(schemas)) if (isObject(schema)) named.set(withoutDescription(schema), name);
  for (const { holder, key } of schemaSlots(doc)) {
    if (holder === schemas) continue;
    const schema = holder[key];
    if (!isObject(schema) || schema.$ref) continue;
    const name = named.get(withoutDescription(schema));
    if (name) holder[key] = { $ref: `${REF}${name}` };
  }

  // Only the components the paths use, directly or through other components.
  const used = referencedComponents({ paths: doc.paths ?? null });
  for (let grew = true; grew; ) {
    grew = false;
    for (const name of [...used]) {
      for (const inner of referencedComponents({ schema: schemas[name] ?? null })) {
        if (!used.has(inner)) {
          used.add(inner);
          grew = true;
        }
      }
    }
  }
  for (const name of Object.keys(schemas)) if (!used.has(name)) delete schemas[name];
  for (const name of Object.keys(schemas)) {
    const plain = name.replace(/Input$/, '');
    if (plain === name || plain in schemas) continue;
    schemas[plain] = schemas[name] as Json;
    delete schemas[name];
    renameRefs(doc, name, plain);
  }

  // Only the security schemes some route uses (ADMIN_API_KEYS appears with the first admin route).
  const schemes = isObject(components.securitySchemes) ? components.securitySchemes : {};
  const inUse = new Set<string>();
  for (const item of Object.values(isObject(doc.paths) ? doc.paths : {})) {
    for (const op of Object.values(isObject(item) ? item : {})) {
      if (isObject(op) && Array.isArray(op.security)) for (const requirement of op.security) if (isObject(requirement)) for (const name of Object.keys(requirement)) inUse.add(name);
    }
  }
  for (const name of Object.keys(schemes)) if (!inUse.has(name)) delete schemes[name];

  for (const [path, item] of Object.entries(isObject(doc.paths) ? doc.paths : {})) {
    for (const [method, op] of Object.entries(isObject(item) ? item : {})) {
      if (!isObject(op) || !isObject(op.responses)) continue;
      // A body that may be null may be left out: Fastify validates a request without one as null.
      if (isObject(op.requestBody) && admitsNull(op.requestBody)) op.requestBody.required = false;
      for (const common of COMMON_RESPONSES) {
        if (!common.applies(path, method, op) || op.responses[common.status]) continue;
        op.responses[common.status] = { description: common.description, content: { 'application/json': { schema: { $ref: `${REF}${common.schema}` } } } };
      }
      for (const [status, response] of Object.entries(op.responses)) {
        if (isObject(response) && response.description === 'Default Response') response.description = STATUS_DESCRIPTIONS[status] ?? `HTTP ${status}`;
      }
    }
  }
  return doc;
}

const transformObject = createJsonSchemaTransformObject({});

/** @fastify/swagger's options for the gateway: the zod transforms, then finishDocument. */
export function swaggerOptions(info: { title: string; description: string; version: string }, tags: { name: string; description: string }[]): SwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info,
      // Relative: the gateway that serves this document is the server (its address differs per deployment).
      servers: [{ url: '/', description: 'The gateway serving this document' }],
      tags,
      components: { securitySchemes: SECURITY_SCHEMES as never },
    },
    transform: jsonSchemaTransform,
    transformObject: (document) => finishDocument(transformObject(document) as unknown as JsonObject) as never,
  };
}
