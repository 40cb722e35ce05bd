import { readFileSync } from 'node:fs';

// What every entry point does with its command line before anything else: --help and --version
// answer and exit 0 (nothing started, nothing migrated); an option it does not take exits 2.

export interface EntryPoint {
  /** As the user runs it, e.g. "npm start (node dist/src/server.js)". */
  command: string;
  /** One line: what it does. */
  summary: string;
  /** Lines after the summary: its own options, where its settings come from. */
  details?: string[];
  /** Its own options (besides --help and --version); unset: it takes none. */
  accepts?: (arg: string) => boolean;
}

/**
 * The package's name and version, from the nearest package.json above this file: two levels up from
 * src/config/cli.ts, three from dist/src/config/cli.js (what npm start and the image run).
 */
export function packageVersion(): string {
  for (const up of ['../package.json', '../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'underwriting-gateway' && pkg.version) return `${pkg.name} ${pkg.version}`;
    } catch {
      /* not there: try the next */
    }
  }
  return 'underwriting-gateway (version unknown)';
}

export function usage(entry: EntryPoint): string {
  return [
    `usage: ${entry.command} [--help] [--version]`,
    '',
    entry.summary,
    ...(entry.details ? ['', ...entry.details] : []),
    '',
    '  --help, -h      print this and exit',
    '  --version, -V   print the version and exit',
    '',
    'Settings come from the environment (and a .env file outside production): docs/configuration.md.',
    '',
  ].join('\n');
}

export type CommandLineVerdict = { run: true; args: string[] } | { run: false; exitCode: 0 | 2; out: 'stdout' | 'stderr'; text: string };

/** What the command line asks for; pure, for tests. */
export function readCommandLine(entry: EntryPoint, argv: readonly string[]): CommandLineVerdict {
  if (argv.includes('--help') || argv.includes('-h')) return { run: false, exitCode: 0, out: 'stdout', text: usage(entry) };
  if (argv.includes('--version') || argv.includes('-V')) return { run: false, exitCode: 0, out: 'stdout', text: `${packageVersion()}\n` };
  const unknown = argv.filter((a) => !(entry.accepts?.(a) ?? false));
  if (unknown.length > 0) {
    return { run: false, exitCode: 2, out: 'stderr', text: `${entry.command}: unknown option ${unknown.join(' ')}\n${usage(entry)}` };
  }
  return { run: true, args: [...argv] };
}

/**
 * For entry points, first thing: the arguments to run with, or undefined when the command line was
 * answered (--help, --version: exit code 0) or refused (an unknown option: usage on stderr, exit
 * code 2). Then the caller returns without doing anything else, and the process ends by itself.
 */
export function commandLine(entry: EntryPoint, argv: readonly string[] = process.argv.slice(2)): string[] | undefined {
  const verdict = readCommandLine(entry, argv);
  if (verdict.run) return verdict.args;
  (verdict.out === 'stdout' ? process.stdout : process.stderr).write(verdict.text);
  process.exitCode = verdict.exitCode;
  return undefined;
}
