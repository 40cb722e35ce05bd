import { StringDecoder } from 'node:string_decoder';

// A campaign's file, read as it arrives: NDJSON lines or CSV records (RFC 4180), each with the
// number of the line it starts on. Nothing holds more than one line (and one network chunk):
// a file of a million lines passes through in constant memory.

/** One line of the file: its text (NDJSON) or its fields (CSV), or why it could not be read. */
export type FileLine =
  | { line: number; text: string; fields?: undefined; problem?: undefined }
  | { line: number; fields: string[]; text?: undefined; problem?: undefined }
  | { line: number; problem: string; text?: undefined; fields?: undefined };

/** A body as it arrives: the request's stream (or, in tests, its chunks). */
export type Source = AsyncIterable<Buffer | string> | Iterable<Buffer | string>;

export interface ReadLimits {
  /** The whole body, in bytes. */
  maxBytes: number;
  /** One line (one CSV record), in characters. */
  maxLineChars: number;
}

/** The body went past ReadLimits.maxBytes: reading stops there (413). */
export class BodyTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the body is larger than ${maxBytes} bytes`);
    this.name = 'BodyTooLargeError';
  }
}

/** The file cannot be read on from here (a CSV quote never closed within a line's limit): 400. */
export class UnreadableFileError extends Error {
  constructor(
    readonly line: number,
    message: string,
  ) {
    super(message);
    this.name = 'UnreadableFileError';
  }
}

/**
 * The body's chunks, counted against the byte limit, decoded as UTF-8 (a character split across
 * chunks is kept whole), a byte order mark before the first character dropped (NDJSON's and CSV's
 * alike: JSON.parse would not read it, and a CSV's quoted first column would not read as quoted).
 * Read through its iterator by hand: when reading stops early (a refused header, too many lines),
 * the request's stream is left as it is rather than destroyed, which would take its socket down
 * and the answer with it (the answer then closes the connection).
 */
async function* decoded(body: Source, maxBytes: number): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  let bytes = 0;
  let atStart = true;
  const chunks: AsyncIterator<Buffer | string> | Iterator<Buffer | string> =
    Symbol.asyncIterator in body ? body[Symbol.asyncIterator]() : body[Symbol.iterator]();
  for (;;) {
    const next = await chunks.next();
    if (next.done) break;
    const chunk = next.value;
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    bytes += buffer.length;
    if (bytes > maxBytes) throw new BodyTooLargeError(maxBytes);
    let text = decoder.write(buffer);
    if (atStart && text.length > 0) {
      atStart = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    yield text;
  }
  yield decoder.end();
}

const tooLong = (line: number, limits: ReadLimits): FileLine => ({ line, problem: `the line is longer than ${limits.maxLineChars} characters` });

/**
 * What the decoder made of bytes that are no UTF-8 (a file saved as Windows-1252, say): refused by
 * line, never queued with its letters replaced. A U+FFFD written as such marks such a loss too.
 */
const REPLACED = '\ufffd';
const NOT_UTF8 = 'the line holds a byte that is no UTF-8, or U+FFFD (the mark of a letter lost before): send the file in UTF-8, with its letters';

/**
 * NDJSON: one JSON text per line (LF or CRLF), in UTF-8 with or without a byte order mark. Blank
 * lines are skipped but counted, so numbers are what an editor shows. Yields the lines of each chunk together (one await per chunk, not per line).
 */
export async function* ndjsonLines(body: Source, limits: ReadLimits): AsyncGenerator<FileLine[]> {
  let pending = '';
  let line = 0;
  /** Inside a line already reported too long: its rest is dropped up to the next newline. */
  let skipping = false;
  const take = (text: string, out: FileLine[]) => {
    line++;
    // The limit is the line's own characters: a CRLF file's line is no longer than the same line's in an LF file.
    const trimmed = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (trimmed.length > limits.maxLineChars) return void out.push(tooLong(line, limits));
    if (trimmed.includes(REPLACED)) out.push({ line, problem: NOT_UTF8 });
    else if (trimmed.trim() !== '') out.push({ line, text: trimmed });
  };
  for await (const text of decoded(body, limits.maxBytes)) {
    const out: FileLine[] = [];
    let start = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      const piece = text.slice(start, nl);
      start = nl + 1;
      if (skipping) {
        skipping = false;
      } else {
        take(pending + piece, out);
      }
      pending = '';
    }
    if (!skipping) {
      pending += text.slice(start);
      // One more for the CR of a CRLF whose LF is still to come (take() judges the whole line).
      if (pending.length > limits.maxLineChars + 1) {
        line++;
        out.push(tooLong(line, limits));
        pending = '';
        skipping = true;
      }
    }
    if (out.length > 0) yield out;
  }
  if (!skipping && pending !== '') {
    const out: FileLine[] = [];
    take(pending, out);
    if (out.length > 0) yield out;
  }
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const LF = 0x0a;
const CR = 0x0d;

/**
 * CSV as RFC 4180 has it: fields separated by commas, records by CRLF (or LF); a field in double
 * quotes may hold commas, line breaks and doubled quotes (""). A quote inside an unquoted field is
 * kept as it is. Each record carries the line it starts on; empty lines are skipped but counted.
 */
export async function* csvRecords(body: Source, limits: ReadLimits): AsyncGenerator<FileLine[]> {
  let physical = 1;
  let recordLine = 1;
  let fields: string[] = [];
  let field = '';
  let chars = 0;
  /** 0: at a field's start, 1: in an unquoted field, 2: in a quoted one, 3: just after a quote in a quoted one, 4: skipping a refused record to its end. */
  let state = 0 as 0 | 1 | 2 | 3 | 4;
  /** Why the current record is refused; it is skipped to its end. */
  let problem: string | undefined;
  let atRecordStart = true;

  const endRecord = (out: FileLine[]) => {
    if (problem !== undefined) out.push({ line: recordLine, problem });
    else {
      fields.push(field);
      out.push(fields.some((f) => f.includes(REPLACED)) ? { line: recordLine, problem: NOT_UTF8 } : { line: recordLine, fields });
    }
    fields = [];
    field = '';
    chars = 0;
    state = 0;
    problem = undefined;
    atRecordStart = true;
  };
  const refuse = (why: string) => {
    problem = why;
    state = 4;
  };

  for await (const text of decoded(body, limits.maxBytes)) {
    const out: FileLine[] = [];
    let from = 0; // where the unsaved part of the current field starts in `text`
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (atRecordStart) {
        if (c === LF || c === CR) {
          if (c === LF) physical++;
          from = i + 1;
          continue;
        }
        atRecordStart = false;
        recordLine = physical;
      }
      if (c === LF) physical++;
      if (state === 4) {
        if (c === LF) {
          from = i + 1;
          endRecord(out);
        }
        continue;
      }
      // The record's own characters count, its line ending (outside quotes) does not.
      if (!((c === LF || c === CR) && state !== 2) && ++chars > limits.maxLineChars) {
        if (state === 2) throw new UnreadableFileError(recordLine, `line ${recordLine}: a quoted field runs past ${limits.maxLineChars} characters (is a closing quote missing?)`);
        refuse(`the line is longer than ${limits.maxLineChars} characters`);
        if (c === LF) {
          from = i + 1;
          endRecord(out);
        }
        continue;
      }
      if (state === 2) {
        if (c === QUOTE) {
          field += text.slice(from, i);
          from = i + 1;
          state = 3;
        }
        continue;
      }
      if (state === 3) {
        if (c === QUOTE) {
          // A doubled quote: one quote in the field, read on from here.
          from = i;
          state = 2;
        } else if (c === COMMA) {
          fields.push(field);
          field = '';
          from = i + 1;
          state = 0;
        } else if (c === LF) {
          from = i + 1;
          endRecord(out);
        } else if (c !== CR) {
          refuse('a quoted field must be followed by a comma or the end of the line');
        }
        continue;
      }
      if (state === 0) {
        if (c === QUOTE) {
          from = i + 1;
          state = 2;
          continue;
        }
        state = 1;
      }
      if (c === COMMA) {
        fields.push(field + text.slice(from, i));
        field = '';
        from = i + 1;
        state = 0;
      } else if (c === LF) {
        field += text.slice(from, i);
        from = i + 1;
        endRecord(out);
      } else if (c === CR) {
        // The CR of a CRLF (or a stray one) is no part of the field.
        field += text.slice(from, i);
        from = i + 1;
      }
    }
    // The chunk ends inside a field: keep what was read of it.
    if (!atRecordStart && (state === 1 || state === 2)) field += text.slice(from);
    if (out.length > 0) yield out;
  }
  if (!atRecordStart) {
    if (state === 2) refuse('a quoted field is not closed before the end of the file');
    const out: FileLine[] = [];
    endRecord(out);
    yield out;
  }
}
