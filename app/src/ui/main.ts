// Entry of the app page (index.html): mounts the Svelte app.
import { mount } from 'svelte';
import App from './components/App.svelte';
import './app.css';

const target = document.getElementById('app');
if (target) mount(App, { target });
