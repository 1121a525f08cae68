// Vite builds the PWA from app/ into dist/. Every top-level app/*.html is a page (index.html,
// bench.html, ...), so a page that does not exist yet is simply not built.
import { readdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vite';
import { SECURITY_HEADERS } from './scripts/lib/headers.mjs';

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
  // The app's UI (app/src/ui) is Svelte 5.
  plugins: [svelte({ configFile: false })],
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
