/**
 * Runs a teardown step and says on stderr (in the CI log) when it took over 5 s: page.test.ts has
 * stalled for 90-190 s at times, once inside a subtest's teardown, and where is not known yet.
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
