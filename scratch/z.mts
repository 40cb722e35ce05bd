import { z } from 'zod';
const w = z.string().regex(/^\d{1,6}$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(0).max(30));
const m = w.meta({ type: 'integer', minimum: 0, maximum: 30 } as any);
const q = z.object({ a: w.optional(), b: m.optional() });
console.log(JSON.stringify(z.toJSONSchema(q, { io: 'input', target: 'openapi-3.0', unrepresentable: 'any' })));
const o = z.object({ d: z.enum(['a','b']).nullable() });
console.log(JSON.stringify(z.toJSONSchema(o, { io: 'output', target: 'openapi-3.0' })));
