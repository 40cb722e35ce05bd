/**
 * The gateway's Node flags, as `npm start` and the Dockerfile's CMD pass them (its memory under
 * load: docs/performance-history.md); the bench harnesses start it with them, and test/start-flags.test.ts
 * checks that the three agree.
 */
export const GATEWAY_NODE_ARGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=100'];
