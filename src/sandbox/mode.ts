import type { FastifyBaseLogger } from 'fastify';

/** The built-in simulator, started in the gateway's process when no PROVIDER_BASE_URL is set. */
export interface SandboxMode {
  providerBaseUrl: string;
  partnerToken: string;
  /** Where the simulator delivers callbacks: the gateway's own route, known once it listens. */
  setCallbackUrl(url: string): void;
  close(): Promise<void>;
}

// Placeholder until the sandbox provider lands.
export async function startSandboxMode(_log: FastifyBaseLogger): Promise<SandboxMode> {
  throw new Error('sandbox mode is not available yet: set PROVIDER_BASE_URL and PARTNER_TOKEN');
}
