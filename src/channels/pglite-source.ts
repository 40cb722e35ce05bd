import type { PGlite } from '@electric-sql/pglite';
import type { Log, Source, SourceHandlers } from './source.js';

/** PGlite is one in-process engine: its listen() never loses a connection. */
export function pgliteSource(pglite: PGlite, channel: string, log: Log, handlers: SourceHandlers): Source {
  const unlisten = pglite.listen(channel, (payload) => handlers.onNotify(payload)).then(
    (u) => {
      handlers.onListening();
      return u;
    },
    (err: Error) => {
      log.warn({ channel, err: { message: err.message } }, 'could not listen for notifications');
      return undefined;
    },
  );
  return {
    check: () => {},
    retryNow: () => {},
    async stop() {
      const u = await unlisten;
      if (u && !pglite.closed) await u().catch(() => {});
    },
  };
}
