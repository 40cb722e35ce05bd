/**
 * Resolves with the first value of check() that is neither undefined nor false, looking again every
 * 20 ms: for a state (a row, a count, another process's metrics), where no event can be awaited.
 * Fails, naming what it waited for, once the deadline passes: a poll never hangs a test.
 */
export async function until<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
  what = 'the awaited state',
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) throw new Error(`${what} never came (waited ${timeoutMs} ms)`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
