import { pino } from 'pino';
import { ConfigError } from '../config.js';
import { loggerOptions, redactUrl } from '../logger.js';
import { buildSandboxApp } from './app.js';
import { describeSandboxConfig, loadSandboxConfig, type SandboxConfig } from './config.js';

// `npm run sandbox`: the provider simulator alone, as its own server.

function readConfig(): Readonly<SandboxConfig> {
  try {
    return loadSandboxConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.problems.join('\n')}\n`);
      process.exit(1);
    }
    throw err;
  }
}

async function main(): Promise<void> {
  const config = readConfig();
  const log = pino(loggerOptions(config.logLevel));
  const app = await buildSandboxApp(config, { logger: log });
  log.info(describeSandboxConfig(config, redactUrl), 'sandbox provider settings');
  if (config.callbackUrl === undefined) {
    log.warn('SANDBOX_CALLBACK_URL is not set: underwritings are accepted but no callback is ever delivered');
  }
  await app.listen({
    host: config.host,
    port: config.port,
    listenTextResolver: (address) => `sandbox provider listening at ${address}`,
  });

  const stop = async (signal: string): Promise<void> => {
    log.info({ signal }, 'sandbox provider shutting down');
    await app.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`sandbox provider failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
