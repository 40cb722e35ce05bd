import type { Socket } from 'node:net';
import type { FastifyRequest } from 'fastify';

// The server's request timeout (SERVER_TIMEOUTS.requestTimeoutMs, 30 s) bounds how long a client
// may take to send its whole request: it cuts off slow clients. A campaign's file (up to 1 GiB,
// read at the pace its lines are stored) takes longer by design. Such an upload is let past that
// bound, and is bounded instead by its silence: no byte for `idleMs` ends it, with an answer (408)
// before the connection closes, as the request timeout's.

const LONG_UPLOAD = Symbol('longUpload');
const SILENCE = Symbol('silence');
type Marked = Socket & { [LONG_UPLOAD]?: boolean };
type Silenced = FastifyRequest & { [SILENCE]?: Promise<never> };

/**
 * Lets this request's body take longer than the request timeout, as long as bytes keep coming
 * (`idleMs`); past that, its reader (bodyUntilSilent) meets `silenced()`, the error to answer.
 */
export function allowLongUpload(request: FastifyRequest, idleMs: number, silenced: () => Error): void {
  const socket = request.raw.socket as Marked | undefined;
  // An injected request (tests) has no connection, and so no timeouts.
  if (!socket || typeof request.raw.setTimeout !== 'function') return;
  socket[LONG_UPLOAD] = true;
  let fall!: (err: Error) => void;
  const silence = new Promise<never>((_, reject) => (fall = reject));
  silence.catch(() => {}); // nobody may be reading when it falls
  (request as Silenced)[SILENCE] = silence;
  // A listener of the request's own keeps Node from destroying the socket: the reader answers.
  request.raw.setTimeout(idleMs, () => fall(silenced()));
  // Once the body is in, the connection (kept alive for the next request) is an ordinary one again.
  const over = () => {
    delete socket[LONG_UPLOAD];
    socket.setTimeout(0);
  };
  request.raw.once('end', over);
  request.raw.once('close', over);
}

/**
 * The request's body as its reader should take it: each chunk, or allowLongUpload's error once the
 * client has been silent for its `idleMs` (the body as it is where no bound was set).
 * The body is never destroyed here: the answer must still reach the client.
 */
export function bodyUntilSilent(request: FastifyRequest, body: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
  const silence = (request as Silenced)[SILENCE];
  if (silence === undefined) return body;
  return (async function* () {
    const chunks = body[Symbol.asyncIterator]();
    for (;;) {
      const next = chunks.next();
      next.catch(() => {}); // left pending when silence wins: its end (the socket closed) is nobody's error
      const read = await Promise.race([next, silence]);
      if (read.done) return;
      yield read.value;
    }
  })();
}

/** True for the connection of a request allowLongUpload let past the request timeout. */
export function isLongUpload(socket: Socket): boolean {
  return (socket as Marked)[LONG_UPLOAD] === true;
}
