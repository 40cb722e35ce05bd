import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { CapabilityDeps } from '../app.js';

// Placeholder: the capability lands in its own change.
export const callbackRoutes =
  (_deps: CapabilityDeps): FastifyPluginAsyncZod =>
  async () => {};
