// The benchmark page (app/bench.html): checks that the engine can run here, runs the suite on
// "Run" (or at once with ?auto=1) and shows the table as rows arrive.
//
// Query parameters, for the headless runner and for quick looks:
//   auto=1           run on load
//   peers=1,8,64     peer counts (default 1..256 in powers of two)
//   reps=3           repetitions per processor (median kept)
//   work=1           scales the quanta rendered per run
//   loss=0.01        packet loss probability (to see what concealment costs)
//   jitter=3         largest arrival delay in quanta, 0..3
// When the run ends, `window.benchResult` holds the result and `document.body.dataset.bench` is
// "done" (or "error", with `window.benchError`).

import { engineModule, opusModule } from '../../app/src/audio/host';
import { engineUnavailableReason } from '../../app/src/audio/support';
import {
  BUDGET_NS,
  DEFAULT_SETTINGS,
  QUANTUM_NS,
  runBench,
  type BenchResult,
  type BenchSettings,
  type CodecRow,
  type EngineRow,
} from './measure';

declare global {
  interface Window {
    benchResult?: BenchResult;
    benchError?: string;
  }
}

function el<T extends HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`#${id} missing`);
  return e as T;
}

function settingsFromQuery(q: URLSearchParams): BenchSettings {
  const s: BenchSettings = { ...DEFAULT_SETTINGS };
  const peers = q.get('peers');
  if (peers) {
    const list = peers
      .split(',')
      .map(Number)
      .filter((n) => Number.isInteger(n) && n >= 1 && n <= 256);
    if (list.length > 0) s.peers = list;
  }
  const reps = Number(q.get('reps'));
  if (Number.isInteger(reps) && reps >= 1 && reps <= 15) s.reps = reps;
  const work = Number(q.get('work'));
  if (work > 0 && work <= 10) s.work = work;
  const loss = q.get('loss');
  if (loss !== null && Number(loss) >= 0 && Number(loss) <= 0.5) s.loss = Number(loss);
  const jitter = q.get('jitter');
  if (jitter !== null && [0, 1, 2, 3].includes(Number(jitter))) s.jitter = Number(jitter);
  return s;
}

function status(kind: 'ok' | 'error' | 'info', title: string, detail = ''): void {
  const box = el('status');
  const t = document.createElement('strong');
  t.textContent = title;
  const d = document.createElement('span');
  d.textContent = detail;
  box.replaceChildren(t, d);
  box.className = `status ${kind === 'info' ? '' : kind}`;
}

function fmt(x: number, digits = 0): string {
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/**
 * Puts a row of `cells` in table `id` under the key `key` (the row's data-key), replacing the
 * row of that key if there is one (rows are refined after every repetition).
 */
function putRow(id: string, key: string, cells: string[], className = ''): void {
  const table = el<HTMLTableElement>(id);
  table.hidden = false;
  const tr = document.createElement('tr');
  tr.dataset.key = key;
  tr.className = className;
  for (const c of cells) {
    const td = document.createElement('td');
    td.textContent = c;
    tr.append(td);
  }
  const body = table.tBodies[0];
  const existing = body.querySelector(`tr[data-key="${key}"]`);
  if (existing) existing.replaceWith(tr);
  else body.append(tr);
}

/** The row for `row.peers`. */
function showRow(row: EngineRow): void {
  const wasmPerQuantum = row.wasm_quantum_fraction * QUANTUM_NS;
  putRow(
    'results',
    String(row.peers),
    [
      String(row.peers),
      fmt(row.wasm_ns_per_peer_quantum),
      fmt(row.js_ns_per_peer_quantum),
      `${fmt(row.js_over_wasm, 1)}×`,
      `${fmt(row.wasm_quantum_fraction * 100, 2)}%`,
      String(row.underruns),
    ],
    wasmPerQuantum >= BUDGET_NS ? 'over' : '',
  );
}

/** The row for `row.codec`. */
function showCodecRow(row: CodecRow): void {
  putRow('codecs', row.codec, [
    row.codec === 'pcm16' ? 'PCM16' : `Opus ${row.kbps} kbit/s`,
    fmt(row.wasm_ns_per_peer_quantum),
    `${fmt(row.over_pcm16, 1)}×`,
    `${fmt(row.wasm_quantum_fraction * 100, 2)}%`,
    String(row.underruns),
  ]);
}

function verdict(result: BenchResult): string {
  const rows = result.engine;
  const n = result.max_peers_under_5pct;
  const largest = rows[rows.length - 1];
  // Linear estimate of where 5% of the quantum is reached, from the largest run.
  const perPeerNs = (largest.wasm_quantum_fraction * QUANTUM_NS) / largest.peers;
  const estimate = perPeerNs > 0 ? Math.floor(BUDGET_NS / perPeerNs) : Infinity;
  if (n === 0) return 'Even one player takes more than 5% of the audio quantum on this device.';
  const more = n === largest.peers && estimate > n ? ` (about ${fmt(estimate)} by extrapolation)` : '';
  return `This device mixes ${n} players within 5% of each audio quantum${more}.`;
}

async function run(settings: BenchSettings): Promise<void> {
  const button = el<HTMLButtonElement>('run');
  const progress = el<HTMLProgressElement>('progress');
  const phase = el('phase');
  button.disabled = true;
  progress.hidden = false;
  el('verdict').textContent = '';
  el<HTMLTableElement>('results').tBodies[0].replaceChildren();
  el<HTMLTableElement>('codecs').tBodies[0].replaceChildren();
  document.body.dataset.bench = 'running';
  try {
    const [module, opus] = await Promise.all([engineModule(), opusModule()]);
    const result = await runBench(
      module,
      settings,
      (p) => {
        progress.max = p.total;
        progress.value = p.done;
        phase.textContent =
          p.rep < 0
            ? `${p.peers} players${p.codec ? ` sending ${p.codec}` : ''}: preparing…`
            : `Round ${p.rep + 1} of ${settings.reps}: ${p.peers} players${p.codec ? ` sending ${p.codec}` : ''}, ${p.kind.toUpperCase()}…`;
      },
      showRow,
      { module: opus, onRow: showCodecRow },
    );
    progress.value = progress.max;
    phase.textContent = `Done in the browser ${navigator.userAgent.match(/Chrom\w+\/[\d.]+|Firefox\/[\d.]+|Version\/[\d.]+ Safari/)?.[0] ?? ''}.`;
    el('verdict').textContent = verdict(result);
    window.benchResult = result;
    document.body.dataset.bench = 'done';
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    status('error', 'The benchmark failed.', message);
    window.benchError = message;
    document.body.dataset.bench = 'error';
  } finally {
    button.disabled = false;
  }
}

function main(): void {
  const reason = engineUnavailableReason();
  const button = el<HTMLButtonElement>('run');
  if (reason) {
    const isolated = globalThis.crossOriginIsolated === true;
    status(
      'error',
      isolated
        ? 'The engine cannot run in this browser.'
        : 'This page is not cross-origin isolated (crossOriginIsolated is false).',
      isolated
        ? reason
        : `${reason} Start Tutti with "npm start" and open this page from the address it prints.`,
    );
    window.benchError = reason;
    document.body.dataset.bench = 'error';
    return;
  }
  status(
    'ok',
    'Ready: this page is cross-origin isolated.',
    'Shared memory, AudioWorklet and WebAssembly are available.',
  );
  const settings = settingsFromQuery(new URLSearchParams(location.search));
  button.disabled = false;
  button.addEventListener('click', () => void run(settings));
  if (new URLSearchParams(location.search).get('auto') === '1') void run(settings);
}

main();
