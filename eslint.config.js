// eslint (npm test's `lint` suite, `npm run lint`): the recommended rules of eslint,
// typescript-eslint and eslint-plugin-svelte over the app, the service worker, the tests, the
// scripts and the benchmarks. No rule is turned off; the few lines that break one on purpose say
// why beside an eslint-disable-next-line. Formatting is prettier's (.prettierrc.json).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import svelte from 'eslint-plugin-svelte';
import globals from 'globals';
import ts from 'typescript-eslint';

export default defineConfig(
  {
    // Generated, vendored, or data.
    ignores: [
      'dist/',
      'target/',
      'wasm/pkg/',
      'node_modules/',
      '**/fuzz/',
      'bench/results/',
      'tests/vectors/',
    ],
  },
  js.configs.recommended,
  ts.configs.recommended,
  svelte.configs.recommended,
  {
    // The app and the browser tests' page code run in the browser, the rest in Node.
    languageOptions: { globals: { ...globals.browser, ...globals.node } },
  },
  {
    files: ['**/*.svelte', '**/*.svelte.ts'],
    languageOptions: { parserOptions: { parser: ts.parser } },
  },
);
