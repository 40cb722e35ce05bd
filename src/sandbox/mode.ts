import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config/config.js';
import { BANNER_FIELD, redactUrl } from '../observability/logger.js';
import { addressInUse, buildSandboxApp, listenSandbox } from './app.js';
import { describeSandboxConfig, loadSandboxConfig, pendingDeliveriesFile } from './config.js';
import type { CallbackDelivery } from './delivery.js';

/** The built-in simulator, started in the gateway's process when no PROVIDER_BASE_URL is set. */
export interface SandboxMode {
  providerBaseUrl: string;
  partnerToken: string;
  /**
   * Where the simulator delivers callbacks: the gateway's own route, known once it listens. Then
   * it delivers what a previous run left pending.
   */
  setCallbackUrl(url: string): Promise<void>;
  close(): Promise<void>;
}

/** Only this process talks to the in-process simulator, so it listens on loopback alone. */
const SANDBOX_MODE_HOST = '127.0.0.1';

export const SANDBOX_MODE_WARNING =
  'SANDBOX MODE: PROVIDER_BASE_URL is not set, so the built-in sandbox provider answers every underwriting ' +
  'and nothing reaches the real provider. To leave sandbox mode set PROVIDER_BASE_URL and PARTNER_TOKEN.';

/** Above the warning in the pretty (development) form, so that nobody misses it. */
export const SANDBOX_MODE_BANNER = `${'!'.repeat(24)} SANDBOX MODE: nothing reaches the real provider ${'!'.repeat(24)}`;

/**
 * Starts the simulator (SANDBOX_* variables, host forced to loopback) for the gateway to use.
 * Throws ConfigError when a SANDBOX_* variable is invalid.
 */
export async function startSandboxMode(
  log: FastifyBaseLogger,
  gateway: Pick<Config, 'callbackSecret' | 'dataDir'>,
  env: NodeJS.ProcessEnv = process.env,
): Promise<SandboxMode> {
  const config = Object.freeze({ ...loadSandboxConfig(env), host: SANDBOX_MODE_HOST });
  const sandboxLog = log.child({ component: 'sandbox' });
  let callbackUrl: string | undefined;
  let delivery: CallbackDelivery | undefined;
  const dataDir = config.dataDir ?? gateway.dataDir;
  const build = (pendingFile: string | undefined) =>
    buildSandboxApp(config, {
      logger: sandboxLog,
      callbackUrl: () => callbackUrl,
      // Deliveries owed when the process stopped are made after a restart, as a real provider would.
      ...(pendingFile === undefined ? {} : { pendingFile }),
      onDeliveries: (d) => (delivery = d),
    });
  let app = await build(dataDir.includes('://') ? undefined : pendingDeliveriesFile(dataDir));
  try {
    await listenSandbox(app, config);
  } catch (err) {
    await app.close();
    // Nothing configured and the default port taken (npm run sandbox, another gateway in sandbox
    // mode): only this process calls its simulator, so any free port does. Its owed deliveries stay
    // in memory: the file in DATA_DIR is the one of whoever holds SANDBOX_PORT. A port set on
    // purpose is kept to: its error names it.
    if (env.SANDBOX_PORT !== undefined || !addressInUse(err)) throw err;
    app = await build(undefined);
    await listenSandbox(app, { ...config, port: 0 });
    log.warn(
      { sandboxPort: config.port, listensAt: (app.server.address() as AddressInfo).port },
      `SANDBOX_PORT ${config.port} is taken (another sandbox, or another gateway in sandbox mode): the built-in sandbox listens on another port, and the callbacks it still owes do not survive a restart; set SANDBOX_PORT to choose its port`,
    );
  }
  const { port } = app.server.address() as AddressInfo;
  const providerBaseUrl = `http://${config.host}:${port}`;
  log.warn({ providerBaseUrl, [BANNER_FIELD]: SANDBOX_MODE_BANNER }, SANDBOX_MODE_WARNING);
  sandboxLog.info(
    { ...describeSandboxConfig({ ...config, port }, redactUrl), callbackUrl: "the gateway's own callback route" },
    'sandbox provider settings',
  );

  return {
    providerBaseUrl,
    partnerToken: config.partnerToken,
    async setCallbackUrl(url) {
      // With CALLBACK_SECRET set the gateway wants ?token=, as a registered callback URL would carry.
      const target = new URL(url);
      if (gateway.callbackSecret !== undefined) target.searchParams.set('token', gateway.callbackSecret);
      callbackUrl = target.toString();
      sandboxLog.info({ callbackUrl: redactUrl(callbackUrl) }, 'sandbox provider delivers callbacks to the gateway');
      await delivery?.resume();
    },
    close: () => app.close(),
  };
}
