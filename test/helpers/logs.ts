import type { FastifyBaseLogger } from 'fastify';
import { pino } from 'pino';
import { loggerOptions } from '../../src/observability/logger.js';

export interface LogCapture {
  logger: FastifyBaseLogger;
  /** Every line written so far, as JSON text. */
  lines: string[];
  /** Everything written so far, one string, for "never appears" assertions. */
  text(): string;
  /** Parsed entries. */
  entries(): Array<Record<string, unknown>>;
}

/** A logger with the production options (redaction included), writing into memory. */
export function captureLogs(level = 'trace'): LogCapture {
  const lines: string[] = [];
  const logger = pino(loggerOptions(level), { write: (line: string) => void lines.push(line) });
  return {
    logger,
    lines,
    text: () => lines.join(''),
    entries: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
