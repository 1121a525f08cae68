// The baseline of the net benchmark (net-bench.ts): a worker that receives one posted
// ArrayBuffer per packet and only counts it (and its bytes) in shared memory. Its CPU time per
// message is what moving packets by postMessage would cost, before any work on them.
//
// in:  { type: 'init', counters: SharedArrayBuffer }  (Float64Array: [0] messages, [1] bytes)
//      ArrayBuffer (one packet)

const scope = self as unknown as { onmessage: ((ev: MessageEvent) => void) | null };

let counters: Float64Array | null = null;

scope.onmessage = (ev: MessageEvent) => {
  const data: unknown = ev.data;
  if (data instanceof ArrayBuffer) {
    if (!counters) return;
    counters[0]++;
    counters[1] += data.byteLength;
    return;
  }
  const msg = data as { type?: string; counters?: SharedArrayBuffer };
  if (msg.type === 'init' && msg.counters) counters = new Float64Array(msg.counters);
};
