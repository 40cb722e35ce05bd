/** Runs at most `n` of the functions given at once; the others wait their turn, in order. */
export function limiter(n: number): <T>(run: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async (run) => {
    if (running < n) running++;
    // A finishing run hands its place over (running stays the same).
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await run();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}
