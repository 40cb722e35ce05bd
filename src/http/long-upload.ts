import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';

// The server's request timeout (SERVER_TIMEOUTS.requestTimeoutMs, 30 s) bounds how long a client
// may take to send its whole request: it cuts off slow clients. A campaign's file (up to 1 GiB,
// read at the pace its lines are stored) takes longer by design. Such an upload is let past that
// bound, and is bounded instead by its silence: no byte for `idleMs` ends it.

const LONG_UPLOAD = Symbol('longUpload');
type Marked = Socket & { [LONG_UPLOAD]?: boolean };

/** Lets this request's body take longer than the request timeout, as long as bytes keep coming (`idleMs`). */
export function allowLongUpload(request: FastifyRequest, idleMs: number): void {
  const socket = request.raw.socket as Marked | undefined;
  // An injected request (tests) has no connection, and so no timeouts.
  if (!socket || typeof request.raw.setTimeout !== 'function') return;
  socket[LONG_UPLOAD] = true;
  request.raw.setTimeout(idleMs, () => {
    request.raw.destroy(Object.assign(new Error(`no byte of the body for ${idleMs} ms`), { code: 'ERR_UPLOAD_IDLE' }));
  });
  // Once the body is in, the connection (kept alive for the next request) is an ordinary one again.
  const over = () => {
    delete socket[LONG_UPLOAD];
    socket.setTimeout(0);
  };
  request.raw.once('end', over);
  request.raw.once('close', over);
}

/** True for the connection of a request allowLongUpload let past the request timeout. */
export function isLongUpload(socket: Socket): boolean {
  return (socket as Marked)[LONG_UPLOAD] === true;
}
