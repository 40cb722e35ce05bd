import type { AbScenario } from '../lib/compare.js';

// Submit proxy: every request a new customerUuid (never in flight), forwarded to the stub provider.

export function submitScenario(): AbScenario {
  return {
    name: 'submit',
    connections: 32,
    prepare: async ({ runId }) => ({
      build: (n) => ({
        method: 'POST',
        path: '/v1/underwritings',
        body: JSON.stringify({
          customerUuid: `${runId}${n}`,
          cpf: String(10_000_000_000 + ((n * 7919) % 89_999_999_999)),
          costSavingEnabled: false,
        }),
      }),
    }),
  };
}
