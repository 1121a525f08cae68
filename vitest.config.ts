// Unit tests of the app's TypeScript (tests/unit), run in Node. Component tests compile .svelte
// files with the Svelte plugin and opt into a DOM per file (`// @vitest-environment happy-dom`);
// the "browser" condition makes `svelte` resolve to its client runtime, which has `mount`.
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  plugins: [svelte({ configFile: false })],
  resolve: { conditions: ['browser'] },
  test: {
    include: ['tests/unit/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
  },
});
