// Whether this browser can run the audio engine; the home page shows the answer.
//
// The engine shares its audio rings between the network side and the AudioWorklet through
// SharedArrayBuffer, which browsers only provide to cross-origin isolated pages (the server
// must send COOP `same-origin` and COEP `require-corp`, over HTTPS or on localhost).

export interface Check {
  ok: boolean;
  title: string;
  detail: string;
}

export function checkEngineSupport(g: typeof globalThis = globalThis): Check {
  if (!g.isSecureContext) {
    return {
      ok: false,
      title: 'The audio engine cannot run: this page is not a secure context.',
      detail:
        'Open Tutti over HTTPS, or from http://127.0.0.1 or http://localhost. Browsers only allow ' +
        'cross-origin isolation, and so the shared memory the engine needs, on secure pages.',
    };
  }
  if (!g.crossOriginIsolated) {
    return {
      ok: false,
      title: 'The audio engine cannot run: crossOriginIsolated is false.',
      detail:
        'The server did not send the headers "Cross-Origin-Opener-Policy: same-origin" and ' +
        '"Cross-Origin-Embedder-Policy: require-corp". Without them the browser withholds ' +
        'SharedArrayBuffer, and the engine exchanges audio with its AudioWorklet through shared ' +
        'memory. Start Tutti with "npm start", which serves the app with these headers.',
    };
  }
  if (typeof g.SharedArrayBuffer !== 'function') {
    return {
      ok: false,
      title: 'The audio engine cannot run: SharedArrayBuffer is missing.',
      detail: 'This page is cross-origin isolated, yet the browser offers no SharedArrayBuffer.',
    };
  }
  if (typeof g.AudioWorkletNode !== 'function' || typeof g.WebAssembly !== 'object') {
    return {
      ok: false,
      title: 'The audio engine cannot run: AudioWorklet or WebAssembly is missing.',
      detail: 'Use a current Chromium, Firefox or Safari.',
    };
  }
  return {
    ok: true,
    title: 'Ready: this page is cross-origin isolated.',
    detail: 'Shared memory, AudioWorklet and WebAssembly are available to the audio engine.',
  };
}
