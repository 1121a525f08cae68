// Whether this browser can run the audio engine: the home page shows the answer, and the engine's
// start and the self-test refuse with it.
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
      title: 'The audio engine cannot run: this browser has no SharedArrayBuffer.',
      detail:
        'The page is cross-origin isolated, yet the browser offers no SharedArrayBuffer (some ' +
        'builds of WebKitGTK leave it out), and the engine exchanges audio with its AudioWorklet ' +
        'through shared memory. Use a current Safari, Chrome, Edge or Firefox.',
    };
  }
  if (typeof g.AudioWorkletNode !== 'function') {
    return {
      ok: false,
      title: 'The audio engine cannot run: this browser has no AudioWorklet.',
      detail:
        'The engine runs on the audio thread, in an AudioWorklet. Use a current Safari, Chrome, Edge or Firefox.',
    };
  }
  if (typeof g.WebAssembly !== 'object') {
    return {
      ok: false,
      title: 'The audio engine cannot run: this browser has no WebAssembly.',
      detail:
        'The engine is built as WebAssembly (it may be turned off in this browser). Use a current ' +
        'Safari, Chrome, Edge or Firefox.',
    };
  }
  return {
    ok: true,
    title: 'Ready: this page is cross-origin isolated.',
    detail: 'Shared memory, AudioWorklet and WebAssembly are available to the audio engine.',
  };
}

/** Why the engine cannot run here (the check's title and detail in one sentence pair), or null. */
export function engineUnavailableReason(g: typeof globalThis = globalThis): string | null {
  return reasonOf(checkEngineSupport(g));
}

/**
 * Why this browser cannot join a room although the engine runs, or null: the mesh and the hub
 * both carry audio over RTCPeerConnection data channels (the sound check and the self-test do
 * not need them).
 */
export function webrtcUnavailableReason(g: typeof globalThis = globalThis): string | null {
  if (typeof g.RTCPeerConnection === 'function') return null;
  return (
    "This browser has no RTCPeerConnection. Tutti carries the room's audio over WebRTC data " +
    'channels, which this browser (or its build) leaves out. Use a current Safari, Chrome, Edge ' +
    'or Firefox.'
  );
}

/** The one-line reason a failed check gives; null for a check that passed. */
function reasonOf(c: Check): string | null {
  return c.ok ? null : `${c.title} ${c.detail}`;
}

/** True when a data channel can be transferred to a worker in this browser (the packet pump then
 * runs in a worker; elsewhere on the main thread). Asked of the browser, never of its name. */
export function canTransferDataChannels(): boolean {
  if (typeof RTCPeerConnection === 'undefined' || typeof MessageChannel === 'undefined') return false;
  const pc = new RTCPeerConnection();
  const ch = pc.createDataChannel('probe', { negotiated: true, id: 0 });
  const port = new MessageChannel();
  try {
    port.port1.postMessage(ch, [ch as unknown as Transferable]);
    return true;
  } catch {
    return false;
  } finally {
    port.port1.close();
    port.port2.close();
    pc.close();
  }
}

/**
 * What this browser offers of what Tutti uses, each answered by the browser itself (feature
 * detection, never its name): the README's compatibility table is filled from these answers in
 * each engine the browser tests run. `installPrompt` is only known once the page has waited for
 * the browser's offer (see ui/pwa.ts); here it says whether the browser has the event at all.
 */
export interface BrowserFeatures {
  /** The engine's own verdict (checkEngineSupport). */
  engine: boolean;
  engineReason: string | null;
  worklet: boolean;
  /** SharedArrayBuffer on a cross-origin isolated page. */
  sharedMemory: boolean;
  /** RTCPeerConnection with data channels: the mesh and the hub. */
  dataChannels: boolean;
  channelTransfer: boolean;
  /** AudioContext.setSinkId: the output device chooser. */
  sinkSelection: boolean;
  /** The browser offers installation itself (beforeinstallprompt). */
  installPrompt: boolean;
  /** A service worker: the app opens offline. */
  serviceWorker: boolean;
  /** What recordings are kept with: IndexedDB, Web Locks and workers. */
  recordingStore: boolean;
}

export function browserFeatures(g: typeof globalThis = globalThis): BrowserFeatures {
  const dataChannels = typeof g.RTCPeerConnection === 'function';
  const check = checkEngineSupport(g);
  return {
    engine: check.ok,
    engineReason: reasonOf(check),
    worklet: typeof g.AudioWorkletNode === 'function',
    sharedMemory: g.crossOriginIsolated === true && typeof g.SharedArrayBuffer === 'function',
    dataChannels,
    channelTransfer: dataChannels && canTransferDataChannels(),
    sinkSelection: typeof g.AudioContext === 'function' && 'setSinkId' in g.AudioContext.prototype,
    installPrompt: 'onbeforeinstallprompt' in g,
    serviceWorker: typeof g.navigator === 'object' && 'serviceWorker' in g.navigator,
    recordingStore:
      typeof g.indexedDB === 'object' &&
      typeof g.Worker === 'function' &&
      typeof g.navigator === 'object' &&
      'locks' in g.navigator,
  };
}
