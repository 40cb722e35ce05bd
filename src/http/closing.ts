import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** How often, once closing, connections that hold no request are looked for and closed. */
const REAP_MS = 100;

/**
 * Lets the server close while clients keep connections open. Node's `server.close()` waits for
 * every connection to end. It closes those it sees as idle once, when it is called. It does not
 * close a connection that has not sent a request yet (a browser opens spare ones ahead of need:
 * Chromium does, for the console), and no timeout applies to one once the server is closing. Nor
 * does it close a keep-alive connection whose answer was already on its way and that becomes idle
 * afterwards. Either held close (SIGTERM's shutdown) until the client let go: 95 s and more with a
 * console tab open, past the grace period.
 *
 * Once `begin()` is called, every connection that holds no request being answered is closed, and
 * again every REAP_MS until the server has closed. A request in flight is never cut short: its
 * connection closes once it is answered (see the `Connection: close` the app adds while closing).
 * Costs one listener per connection, nothing per request.
 */
export function closeWhenIdle(server: Server): { begin(): void } {
  const connections = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });

  function reap(): void {
    for (const socket of connections) {
      // Node sets the response being written on its socket until that response has finished:
      // none means no request is being answered (a request whose headers have not all arrived
      // has none either; the server is closing, so it would only be refused).
      if ((socket as Socket & { _httpMessage?: unknown })._httpMessage == null) socket.destroy();
    }
  }

  return {
    begin() {
      reap();
      const timer = setInterval(reap, REAP_MS);
      timer.unref();
      server.once('close', () => clearInterval(timer));
      // Not listening (closed already, or never listened): nothing will emit close.
      if (!server.listening && connections.size === 0) clearInterval(timer);
    },
  };
}
