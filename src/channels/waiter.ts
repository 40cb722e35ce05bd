/**
 * One waiting party: woken by a notification for its key (any notification when it has none), or
 * by a (re)connect of the listener.
 */
export class Waiter {
  #woken = false;
  #resolve: (() => void) | undefined;

  constructor(
    readonly key: string | undefined,
    private readonly onCancel: (waiter: Waiter) => void,
    private readonly onBlock: (waiter: Waiter) => void = () => {},
  ) {}

  wake(): void {
    this.#woken = true;
    this.#resolve?.();
  }

  /** Resolves at the next wake (at once if one came since the last call), after ms, or on either signal's abort. */
  next(ms: number, signal: AbortSignal, also?: AbortSignal): Promise<void> {
    if (this.#woken || signal.aborted || also?.aborted) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        also?.removeEventListener('abort', done);
        this.#resolve = undefined;
        this.#woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      also?.addEventListener('abort', done, { once: true });
      this.#resolve = done;
      this.onBlock(this);
    });
  }

  cancel(): void {
    this.#resolve = undefined;
    this.onCancel(this);
  }
}
