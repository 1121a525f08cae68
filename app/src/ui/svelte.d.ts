// Lets tsc (which does not read .svelte files) type-check the .ts modules that import components.
declare module '*.svelte' {
  import type { Component } from 'svelte';
  const component: Component<any>;
  export default component;
}
