// Headless Chromium for the browser tests and the benchmark runner: Debian's /usr/bin/chromium
// driven by playwright-core (its own browser downloads are not used).
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Flags for a quiet, reproducible headless Chromium (no sandbox: tests run as root in CI). */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Launches headless Chromium.
 * @param {string[]} [extraArgs] flags added to CHROMIUM_ARGS
 */
export async function launchChromium(extraArgs = []) {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM} (set CHROMIUM_PATH, or run scripts/setup.sh)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, ...extraArgs],
  });
}
