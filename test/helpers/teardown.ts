/**
 * Runs a teardown step and says on stderr (in the CI log) when it took over 5 s: that is how a
 * browser test's 96 s stall was found to be app.close() waiting on a connection, first one busy
 * as close began (kept alive), then one Chromium opened and never used (src/http/closing.ts).
 */
export async function timed(what: string, step: () => Promise<unknown>): Promise<void> {
  const started = performance.now();
  try {
    await step();
  } finally {
    const ms = performance.now() - started;
    if (ms > 5_000) process.stderr.write(`# slow teardown: ${what} took ${Math.round(ms)} ms\n`);
  }
}
