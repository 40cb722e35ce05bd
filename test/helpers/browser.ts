import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type ConsoleMessage, type Page, type Request } from 'playwright-core';
import type { Test } from 'tap';
import { buildConsole } from '../../src/console/build.js';

/** Debian's Chromium; .ci/run installs it when missing. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Every wait of a page test is bounded by Playwright's own timeouts: a stuck page fails, never hangs CI. */
export const WAIT_MS = 10_000;

let built: Promise<unknown> | undefined;
/** The console's bundle, built once per test process, as `npm run build` builds it. */
export function ensureConsoleBuilt(): Promise<unknown> {
  built ??= buildConsole();
  return built;
}

/**
 * How long a file that drives Chromium may run, whatever .taprc's limit (120 s then). On a loaded CI
 * machine Chromium has stalled for 90-105 s inside one call Playwright does not bound, then gone on
 * (2026-11-23: in 2 of 4 full CI runs, page.test.ts, once together with stats.test.ts in another
 * process; once in 4 local runs beside two heavy files; cause not found). Every wait a test makes
 * is still bounded by WAIT_MS, and a real hang still fails, later.
 */
const BROWSER_FILE_TIMEOUT_MS = 300_000;

/** Headless Chromium with a fresh profile, closed (and its profile removed) at teardown. */
export async function launchBrowser(t: Test): Promise<BrowserContext> {
  t.setTimeout(BROWSER_FILE_TIMEOUT_MS);
  const profile = await mkdtemp(join(tmpdir(), 'ugw-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    timeout: 30_000,
    viewport: { width: 1280, height: 900 },
  });
  context.setDefaultTimeout(WAIT_MS);
  context.setDefaultNavigationTimeout(WAIT_MS);
  t.teardown(async () => {
    await context.close();
    await rm(profile, { recursive: true, force: true });
  });
  return context;
}

export interface Watched {
  page: Page;
  requests: Request[];
  consoleErrors: ConsoleMessage[];
  pageErrors: Error[];
  /** 404 answers, by URL path. */
  notFound: string[];
}

/** A new page whose every request, console error, uncaught error and 404 is recorded. */
export async function watchedPage(context: BrowserContext): Promise<Watched> {
  const page = await context.newPage();
  const watched: Watched = { page, requests: [], consoleErrors: [], pageErrors: [], notFound: [] };
  page.on('request', (r) => watched.requests.push(r));
  page.on('console', (m) => {
    if (m.type() === 'error') watched.consoleErrors.push(m);
  });
  page.on('pageerror', (e) => watched.pageErrors.push(e));
  page.on('response', (r) => {
    if (r.status() === 404) watched.notFound.push(new URL(r.url()).pathname);
  });
  return watched;
}
