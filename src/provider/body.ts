/**
 * Reads a provider's answer body, at most about maxBytes of it: past that, 'throw' refuses the
 * answer, 'truncate' keeps what was read and stops reading (enough for an excerpt).
 */
export async function readBounded(body: AsyncIterable<Buffer | string>, maxBytes: number, past: 'throw' | 'truncate'): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += buffer.length;
    if (past === 'throw' && size > maxBytes) throw new Error(`answer larger than ${maxBytes} bytes`);
    chunks.push(buffer);
    if (past === 'truncate' && size >= maxBytes) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}
