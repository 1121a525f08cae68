// Lets tsc (which does not read .svelte files) type-check the .ts modules that import components.
declare module '*.svelte' {
  import type { Component } from 'svelte';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any component: its props are not known here
  const component: Component<any>;
  export default component;
}
