import { pino } from 'pino';
import { commandLine } from '../config/cli.js';
import { configOrExit } from '../config/config-error.js';
import { loadConfig } from '../config/config.js';
import { loadEnvFile } from '../config/env-file.js';
import { loggerOptions } from '../observability/logger.js';
import { TokenClient } from './token-client.js';

// `npm run token`: checks the configured client credentials by fetching one token; never prints it.
async function main(): Promise<number> {
  const args = commandLine({
    command: 'npm run token (node dist/src/provider/token-cli.js)',
    summary: 'Checks the token client settings (AUTH_URL, CLIENT_ID, CLIENT_SECRET or CLIENT_ASSERTION_KEY) by fetching one token; never prints it.',
    details: ['Exit 0: a token was issued; 1: it was not; 2: no token client configured.'],
  });
  if (args === undefined) return process.exitCode as number;
  await configOrExit(() => loadEnvFile());
  const config = await configOrExit(() => loadConfig());
  if (!config.tokenClient) {
    process.stdout.write('no token client configured: set AUTH_URL, CLIENT_ID and CLIENT_SECRET (or CLIENT_ASSERTION_KEY)\n');
    return 2;
  }
  // Logs go to stderr so that stdout is only the verdict.
  const log = pino(loggerOptions(config.logLevel), pino.destination(2));
  const client = new TokenClient({ config: config.tokenClient, log, timeoutMs: config.upstreamTimeoutMs });
  const auth = config.tokenClient.assertionKey ? 'signed client assertion (RFC 7523)' : 'HTTP Basic';
  try {
    await client.getToken();
    const status = client.status()!;
    process.stdout.write(
      [
        `credentials work: ${client.tokenUrl} issued a token (client ${config.tokenClient.clientId}, scope ${config.tokenClient.scope}, ${auth})`,
        `expires at ${status.expiresAt.toISOString()} (${status.secondsLeft} s from now)`,
        `renewal at ${status.renewAt.toISOString()}${status.shortLifetime ? ' (half its remaining lifetime: it lives shorter than the 600 s lead)' : ' (exp - 600 s)'}`,
        '',
      ].join('\n'),
    );
    return 0;
  } catch (err) {
    process.stdout.write(
      `credentials do not work: ${client.tokenUrl} (client ${config.tokenClient.clientId}, ${auth}): ${err instanceof Error ? err.message : String(err)}\n`,
    );
    return 1;
  } finally {
    client.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`token: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
