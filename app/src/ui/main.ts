// Entry of the app page (index.html): mounts the Svelte app.
import { mount } from 'svelte';
import { browserFeatures } from '../audio/support';
import App from './components/App.svelte';
import './app.css';

const target = document.getElementById('app');
if (target) mount(App, { target });

// A handle for diagnostics from the browser console (and the browser tests' compatibility table).
(globalThis as { tuttiFeatures?: typeof browserFeatures }).tuttiFeatures = browserFeatures;
