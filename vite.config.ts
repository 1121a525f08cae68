// Vite builds the PWA from app/ into dist/. Every top-level app/*.html is a page (index.html,
// bench.html, ...), so a page that does not exist yet is simply not built.
import { readdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vite';
import { VitePWA } from 'vite-plugin-pwa';
import { SECURITY_HEADERS } from './app/http-headers.mjs';

const repoRoot = dirname(fileURLToPath(import.meta.url));
const appRoot = resolve(repoRoot, 'app');

const pages = Object.fromEntries(
  readdirSync(appRoot)
    .filter((f) => f.endsWith('.html'))
    .map((f) => [f.slice(0, -'.html'.length), resolve(appRoot, f)]),
);

export default defineConfig({
  root: appRoot,
  base: '/',
  publicDir: resolve(appRoot, 'public'),
  // The app's UI (app/src/ui) is Svelte 5. The service worker (sw/sw.ts) is built by the PWA
  // plugin into dist/sw.js with the list of files to precache; the app registers it itself
  // (app/src/ui/pwa.ts), in the production build only.
  plugins: [
    svelte({ configFile: false }),
    VitePWA({
      strategies: 'injectManifest',
      srcDir: resolve(repoRoot, 'sw'),
      filename: 'sw.ts',
      outDir: resolve(repoRoot, 'dist'),
      injectRegister: false,
      manifestFilename: 'manifest.webmanifest',
      manifest: {
        name: 'Tutti',
        short_name: 'Tutti',
        description: 'Rehearse and play music together from a browser, in time.',
        id: '/',
        start_url: '/',
        scope: '/',
        display: 'standalone',
        // --bg of app/src/ui/app.css: the splash screen and title bar match the app.
        theme_color: '#0d0f13',
        background_color: '#0d0f13',
        icons: [
          { src: '/icons/icon-192.png', sizes: '192x192', type: 'image/png', purpose: 'any' },
          { src: '/icons/icon-512.png', sizes: '512x512', type: 'image/png', purpose: 'any' },
          { src: '/icons/icon-maskable-512.png', sizes: '512x512', type: 'image/png', purpose: 'maskable' },
        ],
      },
      injectManifest: {
        // A classic worker: no module-worker support needed to register it.
        rollupFormat: 'iife',
        // Every page, script, style, the engine's .wasm, worklets, icons; not the source maps.
        globPatterns: ['**/*.{html,js,css,wasm,png,svg,webmanifest}'],
        globIgnores: ['**/*.map', 'sw.js'],
        maximumFileSizeToCacheInBytes: 8 * 1024 * 1024,
      },
      devOptions: { enabled: false },
    }),
  ],
  build: {
    outDir: resolve(repoRoot, 'dist'),
    emptyOutDir: true,
    target: 'es2022',
    // Worklet modules and .wasm must stay files: a data: URL cannot be loaded by addModule()
    // under this CSP, and the WASM is compiled with compileStreaming from its URL.
    assetsInlineLimit: 0,
    sourcemap: true,
    rollupOptions: { input: pages },
  },
  worker: { format: 'es' },
  server: {
    host: '127.0.0.1',
    headers: SECURITY_HEADERS,
    // The app imports the wasm-pack output from wasm/pkg, outside app/.
    fs: { allow: [repoRoot] },
  },
  preview: {
    host: '127.0.0.1',
    port: 8080,
    strictPort: true,
    headers: SECURITY_HEADERS,
  },
});
