import Fastify from 'fastify';
const app = Fastify();
await app.register(async (child) => { child.get('/x', async () => ({ a: 1 })); });
app.addHook('onSend', async (req, reply, payload) => { console.log('onSend saw', req.routeOptions.url, reply.statusCode, payload); return payload; });
await app.inject({ url: '/x' });
