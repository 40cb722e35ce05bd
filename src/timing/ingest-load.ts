// How busy this instance is answering callbacks. Answering the provider comes first: the
// outcome-event push, which competes for the same CPU and database, holds back while callbacks
// pile up and catches up as soon as they no longer do.

/**
 * Busy once this many callbacks have been handled at once on average (over about a tenth of a
 * second) for SUSTAINED_MS (a burst: 32 connections posting as fast as they are answered keep
 * 15-30 in hand on two cores); idle again below IDLE_LEVEL. One slow callback, a hiccup, or a lull
 * of a few milliseconds inside a burst flips neither.
 */
export const BUSY_LEVEL = 12;
const IDLE_LEVEL = 6;
/** Time constant of the average, ms. */
const AVERAGE_MS = 100;
/** How long the average must stay at BUSY_LEVEL or above: a hiccup (a slow fsync, a pause) is not a burst. */
const SUSTAINED_MS = 500;

export interface IngestLoad {
  /** A callback is being handled; call the returned function once it is answered (or failed). */
  enter(): () => void;
  /** True while callbacks pile up. */
  busy(): boolean;
  /**
   * True while the average is at the busy level now, however briefly: a burst's first moments,
   * before busy() trusts it to last. Whatever can wait (the push) waits then too.
   */
  pressed(): boolean;
  /** Told each time the instance stops being busy; returns the unsubscribe. */
  onIdle(listener: () => void): () => void;
}

export interface IngestLoadOptions {
  /** Milliseconds, monotonic; tests step it. */
  now?: () => number;
}

export function ingestLoad(options: IngestLoadOptions = {}): IngestLoad {
  const { now = () => performance.now() } = options;
  let handling = 0;
  let level = 0;
  let at = now();
  let busy = false;
  let over: number | undefined;
  // Only while busy: the end of a burst is noticed with no callback arriving to tell.
  let watch: NodeJS.Timeout | undefined;
  const listeners = new Set<() => void>();

  /** Folds the time since the last change, at the count that held during it, into the average. */
  function update(): void {
    const t = now();
    level += (handling - level) * (1 - Math.exp(-(t - at) / AVERAGE_MS));
    at = t;
    if (level < BUSY_LEVEL) over = undefined;
    else over ??= t;
    if (!busy && over !== undefined && t - over >= SUSTAINED_MS) {
      busy = true;
      watch = setInterval(update, AVERAGE_MS / 2);
      watch.unref();
    } else if (busy && level < IDLE_LEVEL) {
      busy = false;
      clearInterval(watch);
      for (const listener of listeners) listener();
    }
  }

  return {
    enter() {
      update();
      handling++;
      let left = false;
      return () => {
        if (left) return;
        left = true;
        update();
        handling--;
      };
    },
    busy() {
      update();
      return busy;
    },
    pressed() {
      update();
      return level >= BUSY_LEVEL;
    },
    onIdle(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
