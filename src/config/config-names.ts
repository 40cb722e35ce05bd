import { CONFIG_VARIABLES, SECRET_VARIABLES } from './config.js';
import { FILE_SUFFIX } from './env.js';
import { ENV_FILE_VARIABLE } from './env-file.js';
import { SANDBOX_CONFIG_VARIABLES, SANDBOX_SECRET_VARIABLES } from './sandbox-env.js';

// Which variables are settings, from the configuration schemas themselves: a variable added to a
// schema is known here at once.

/** Every variable the gateway, its sandbox or their entry points read. */
export const KNOWN_VARIABLES: ReadonlySet<string> = new Set([
  ...CONFIG_VARIABLES,
  ...SANDBOX_CONFIG_VARIABLES,
  ...[...SECRET_VARIABLES, ...SANDBOX_SECRET_VARIABLES].map((name) => `${name}${FILE_SUFFIX}`),
  ENV_FILE_VARIABLE,
]);

/** Prefixes owned by other software, never warned about (Node's own, OpenTelemetry's standard ones). */
const FOREIGN_PREFIXES = new Set(['NODE', 'OTEL']);

/** The service's prefixes: the first word of every multi-word setting (CPF_, EVENT_, SANDBOX_, ...). */
export const SERVICE_PREFIXES: ReadonlySet<string> = new Set(
  [...KNOWN_VARIABLES].filter((n) => n.includes('_')).map((n) => n.slice(0, n.indexOf('_'))).filter((p) => !FOREIGN_PREFIXES.has(p)),
);

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The known name closest to a misspelt one, when it is close enough to be what was meant. */
export function closestKnown(name: string, known: Iterable<string> = KNOWN_VARIABLES): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    if (best === undefined || distance < best.distance) best = { name: candidate, distance };
  }
  return best !== undefined && best.distance <= Math.max(2, Math.floor(name.length / 4)) ? best.name : undefined;
}

/** Kubernetes' service links (SANDBOX_SERVICE_HOST, SANDBOX_PORT_4010_TCP, ...): set for every Service, never settings. */
const SERVICE_LINK = /_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_[A-Z]+)?)$/;

/**
 * One line per environment variable that looks like one of ours (a service prefix) but is no
 * setting: its name and the closest known name. Never a value.
 */
export function unknownVariableWarnings(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env)
    .filter((name) => !KNOWN_VARIABLES.has(name) && !SERVICE_LINK.test(name))
    .filter((name) => name.includes('_') && SERVICE_PREFIXES.has(name.slice(0, name.indexOf('_'))))
    .sort()
    .map((name) => {
      const suggestion = closestKnown(name);
      return suggestion ? `${name} is not a setting; did you mean ${suggestion}?` : `${name} is not a setting (docs/configuration.md lists them)`;
    });
}
