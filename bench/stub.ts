import { createServer } from 'node:http';

// The provider as the benchmark needs it: answers every submit with 202 at once, on keep-alive
// sockets, so the submit scenario measures the gateway and not a remote party. With --tracing it
// is the OTLP sink as well: every POST /v1/traces is taken (200, an empty ExportTraceServiceResponse).

const UNDERWRITINGS = '/api/partner/credit/cards/underwritings';
const ACCEPTED = Buffer.from('{"status":"accepted"}');

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.method === 'POST' && req.url === '/v1/traces') {
      res.writeHead(200, { 'content-type': String(req.headers['content-type'] ?? 'application/x-protobuf'), 'content-length': 0 }).end();
      return;
    }
    const ok = req.method === 'POST' && req.url === UNDERWRITINGS;
    const status = ok ? 202 : req.url === '/healthz' ? 200 : 404;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': ok ? ACCEPTED.length : 2 });
    res.end(ok ? ACCEPTED : '{}');
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1');

process.once('SIGTERM', () => server.close(() => process.exit(0)));
process.once('SIGINT', () => server.close(() => process.exit(0)));
