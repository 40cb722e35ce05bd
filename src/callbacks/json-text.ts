/**
 * A parsed JSON value rebuilt with every string, keys included, passed through `text`, and every
 * number through `number` (by default left as it is). The stored copies of a callback change only
 * its texts: the characters jsonb refuses (intake.ts), the CPFs a body holds (kept-body.ts).
 */
export function mapJsonText(value: unknown, text: (s: string) => string, number: (n: number) => unknown = (n) => n): unknown {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return text(v);
    if (typeof v === 'number') return number(v);
    if (Array.isArray(v)) return v.map(walk);
    // fromEntries defines own properties, so a "__proto__" key stays data, never a prototype.
    if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [text(k), walk(x)]));
    return v;
  };
  return walk(value);
}
