import { commandLine } from '../config/cli.js';
import { configOrExit, writeFatal } from '../config/config-error.js';
import { unknownVariableWarnings } from '../config/config-names.js';
import { loadEnvFile } from '../config/env-file.js';
import { createLogger, defaultLogFormat, logProcessWarnings, redactUrl } from '../observability/logger.js';
import { buildSandboxApp, listenSandbox } from './app.js';
import { describeSandboxConfig, loadSandboxConfig, pendingDeliveriesFile } from './config.js';
import type { CallbackDelivery } from './delivery.js';

// `npm run sandbox`: the provider simulator alone, as its own server.

async function main(): Promise<void> {
  const args = commandLine({
    command: 'npm run sandbox (node dist/src/sandbox/server.js)',
    summary: "Runs the sandbox provider (the provider's API simulated) alone, until SIGTERM or SIGINT.",
  });
  if (args === undefined) return;
  await configOrExit(() => loadEnvFile());
  const config = await configOrExit(() => loadSandboxConfig(), unknownVariableWarnings(process.env));
  const logFormat = config.logFormat ?? defaultLogFormat(process.env.NODE_ENV, process.stdout.isTTY === true);
  const log = createLogger(config.logLevel, logFormat);
  logProcessWarnings(log, logFormat);
  for (const warning of unknownVariableWarnings(process.env)) log.warn(warning);
  let delivery: CallbackDelivery | undefined;
  const app = await buildSandboxApp(config, {
    logger: log,
    pendingFile: pendingDeliveriesFile(config.dataDir ?? './data'),
    onDeliveries: (d) => (delivery = d),
  });
  log.info(describeSandboxConfig(config, redactUrl), 'sandbox provider settings');
  if (config.callbackUrl === undefined) {
    log.warn('SANDBOX_CALLBACK_URL is not set: underwritings are accepted but no callback is ever delivered');
  }
  // Before listening: a signal that comes once it says it listens (while it resumes its pending
  // deliveries, say) stops it cleanly instead of killing it.
  const stop = async (signal: string): Promise<void> => {
    log.info({ signal }, 'sandbox provider shutting down');
    await app.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));

  await configOrExit(() => listenSandbox(app, config));
  await delivery?.resume();
}

main().catch((err: unknown) => {
  writeFatal([`sandbox provider failed to start: ${err instanceof Error ? err.message : String(err)}`]);
  process.exit(1);
});
