// Renders the app icons (PNG) from their SVG sources in app/public/icons/ with headless Chromium.
// The PNGs are committed: the build copies them as they are and does not run this script.
// Run it again after changing an SVG:  node scripts/make-icons.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launchChromium } from '../tests/kit/chromium.mjs';
import { ROOT } from './lib/run.mjs';

const DIR = join(ROOT, 'app', 'public', 'icons');

/** @type {[svg: string, px: number, png: string][]} [source SVG, size in px, output PNG] */
const ICONS = [
  ['icon.svg', 192, 'icon-192.png'],
  ['icon.svg', 512, 'icon-512.png'],
  ['icon-maskable.svg', 512, 'icon-maskable-512.png'],
  ['icon.svg', 180, 'apple-touch-icon.png'],
];

const browser = await launchChromium();
try {
  for (const [svg, size, png] of ICONS) {
    const page = await browser.newPage({ viewport: { width: size, height: size }, deviceScaleFactor: 1 });
    const data = readFileSync(join(DIR, svg)).toString('base64');
    await page.setContent(
      `<!doctype html><html><body style="margin:0;background:transparent">` +
        `<img src="data:image/svg+xml;base64,${data}" width="${size}" height="${size}" style="display:block">` +
        `</body></html>`,
    );
    await page.locator('img').evaluate((img) => /** @type {HTMLImageElement} */ (img).decode());
    const bytes = await page.screenshot({
      omitBackground: true,
      clip: { x: 0, y: 0, width: size, height: size },
    });
    writeFileSync(join(DIR, png), bytes);
    console.log(`icons: ${png} ${size}x${size} (${bytes.length} bytes) from ${svg}`);
    await page.close();
  }
} finally {
  await browser.close();
}
