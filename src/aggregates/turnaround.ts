import { type RawBuilder, sql } from 'kysely';

/**
 * Turnaround (submit -> callback) as a fixed log-scale histogram, the one shape both live rows and
 * the hourly aggregates of purged rows are read in, so that percentiles of a bucket mixing the two
 * merge exactly. Bin b holds turnarounds in [2^(b/8), 2^((b+1)/8)) ms: 8 bins per doubling, each
 * ~9% wide; a percentile is reported as its bin's geometric middle, within ~4.4% of the exact one.
 */
export const BINS_PER_DOUBLING = 8;
/** 2^(320/8) ms is 35 years: every later turnaround shares the last bin. */
export const MAX_BIN = 320;

/** Every date_bin lines up on UTC midnight. */
export const ORIGIN = sql`timestamptz '2000-01-01 00:00:00+00'`;

/** The bin of a completed request's turnaround, as SQL over a request alias's columns. */
export function turnaroundBin(alias: string): RawBuilder<number> {
  const ms = sql`(date_part('epoch', ${sql.ref(`${alias}.completed_at`)} - ${sql.ref(`${alias}.submitted_at`)}) * 1000)`;
  return sql<number>`least(${MAX_BIN}, floor(${BINS_PER_DOUBLING} * ln(greatest(${ms}, 1)) / ln(2)))::smallint`;
}

/** The turnaround a percentile falling in this bin is reported as (its geometric middle), in ms. */
export function binMs(bin: number): number {
  return Math.round(2 ** ((bin + 0.5) / BINS_PER_DOUBLING));
}
