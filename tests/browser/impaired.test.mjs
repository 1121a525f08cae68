// A room over an impaired network, and glitches counted where they happen.
//
// Three pages play in one room against the real server, over real data channels, on headless
// Chromium's own audio device (three pages on the sound server's 128-frame callbacks keep this
// 2-core machine so busy that its own stalls, not the network, would be measured; the latency
// benchmark and tests/browser/audio-backend.test.mjs run on the sound server). The file re-runs
// itself in a private network namespace (tests/kit/netns.mjs), where loopback UDP, i.e. every
// data channel, can pass through tutti-impair (bench/impair); signaling and HTTP (TCP) never do.
//
// 1. Through 5 ± 3 ms of delay and 2 % loss in runs (mean 4 packets, as on Wi-Fi): after a
//    warm-up, every page's adaptive target stays below twice the buffer's own oracle (the
//    smallest fixed depth that would have played every packet that arrived), each remote tone
//    plays at its level, the loss the engines count is the loss the impairer made, and every
//    number playout passed is accounted for: concealed = lost + late.
// 2. The network back to normal, one page opens the stats view: in three openings (of at most
//    six) its audio device misses no callback and its packet pump does not stall (the engine
//    counts both).
// 3. A sender's audio device misses its callbacks for 100 ms (its AudioContext suspended): the
//    sender counts a capture gap of its own, each listener counts a gap in that sender's stream
//    of the same length, and the figures add up (nothing lost, every underrun one that waited
//    for its late packet).
// 4. A sender's packets are dropped for 400 ms (a cut link): each listener's stream of it runs
//    dry, goes idle and restarts; the numbers it skipped are lost and concealed alike, with one
//    underrun, and the tone comes back at its level. (The sender's data channel may hold part of
//    its packets meanwhile, no acknowledgement coming, and deliver them after: up to 150 lost.)
//
// Needs root (a network namespace and iptables rules); without it the file says so and skips.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

const ROOT_OK = typeof process.getuid !== 'function' || process.getuid() === 0;
const { reexecInNetns } = await import('../kit/netns.mjs');
if (ROOT_OK && !(await reexecInNetns(process.argv, { timeoutMs: 295_000 })))
  process.exit(process.exitCode ?? 1);

const { dropUdpFrom, startImpairer } = await import('../kit/netns.mjs');
const { measureOutputTones } = await import('../kit/audio.mjs');
const { joinRoom, ROOM_FLAGS, serverAndBrowser, waitForRoomOf } = await import('../kit/harness.mjs');

const ROOM = 'e2e-impaired';
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
  { name: 'Cy', tone: 770 },
];
/** The network of part 1 (tutti-impair's flags). */
const IMPAIR = { delayMs: 5, jitterMs: 3, loss: 0.02, lossRun: 4, seed: 7 };
/** After the impairer starts: long enough for a few loss runs and lateness windows. */
const WARMUP_MS = 10_000;
/** Seconds over which targets are held to the oracle, read once a second. */
const WATCH_S = 15;
/** The bound: the adaptive target against the buffer's oracle. */
const MAX_TARGET_OVER_ORACLE = 2;
/** A mono tone of amplitude 0.1 panned centre (constant power) reaches each channel at this. */
const EXPECTED_DB = 20 * Math.log10(0.1 * Math.SQRT1_2);
const LEVEL_TOL_DB = 1.5;
/** The engines' loss against the impairer's, absolute (the two draw from one process). */
const LOSS_TOL = 0.005;
/** Packets per second of a 128-frame stream. */
const RATE = 48000 / 128;
const CAPTURE_GAP_MS = 100;
/** Headless Chromium's audio device calls back every 10 ms. */
const CALLBACK_MS = 10;
const OUTAGE_MS = 400;

const h = ROOT_OK ? serverAndBrowser(ROOM_FLAGS) : null;
/** @type {{ name: string, tone: number, page: import('playwright-core').Page }[]} */
const members = [];
/** @type {string[]} */
const logs = [];
/** @type {Awaited<ReturnType<typeof startImpairer>> | null} */
let impairer = null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const skip = ROOT_OK ? false : 'needs root: a private network namespace and iptables rules';

/** Counters of a page by participant name (Session.counters), and its own. */
function counters(page) {
  return page.evaluate(() => {
    const s = window.tutti.session;
    const c = s.counters();
    const byName = {};
    for (const p of s.view.participants) byName[p.name] = c.perPeer[p.peer];
    return {
      own: {
        underruns: c.underruns,
        captureGaps: c.captureGaps,
        captureGapMs: c.captureGapMs,
        localStalls: c.localStalls,
      },
      peers: byName,
    };
  });
}

const all = () => Promise.all(members.map((m) => counters(m.page)));
/** `after − before` of one field for page i's stream from `name`. */
const delta = (before, after, i, name, field) =>
  (after[i].peers[name][field] ?? 0) - (before[i].peers[name][field] ?? 0);
const member = (name) => /** @type {(typeof members)[number]} */ (members.find((m) => m.name === name));
/** Indices of the pages other than `name`'s. */
const listeners = (name) => members.map((m, i) => (m.name === name ? -1 : i)).filter((i) => i >= 0);

/**
 * Waits until no page has a block in flight that would move the loss accounting: every
 * stream's `concealed − late − lost` stays put over half a second. Returns the counters.
 */
async function settledCounters() {
  let prev = await all();
  for (let i = 0; i < 10; i++) {
    await sleep(500);
    const next = await all();
    const sig = (c) =>
      c
        .map((p) =>
          Object.values(p.peers)
            .map((x) => x.concealed - x.late - x.lost)
            .join(','),
        )
        .join(';');
    if (sig(next) === sig(prev)) return next;
    prev = next;
  }
  return prev;
}

/** Each remote tone on every page at its level, its own absent. */
async function checkTones(label) {
  const reports = await Promise.all(
    members.map((m) =>
      measureOutputTones(
        m.page,
        2,
        PLAYERS.map((p) => p.tone),
      ),
    ),
  );
  reports.forEach((r, i) => {
    const line = PLAYERS.map((p) => `${p.tone} Hz ${r.tones[p.tone].db.toFixed(1)} dBFS`).join(', ');
    console.log(`${label}: ${members[i].name} hears ${line}`);
    for (const p of PLAYERS) {
      const db = r.tones[p.tone].db;
      if (p.name === members[i].name) {
        assert.ok(
          db < EXPECTED_DB - 40,
          `${label}: ${members[i].name} hears its own tone at ${db.toFixed(1)} dBFS`,
        );
      } else {
        assert.ok(
          Math.abs(db - EXPECTED_DB) <= LEVEL_TOL_DB,
          `${label}: ${members[i].name} hears ${p.name}'s ${p.tone} Hz at ${db.toFixed(1)} dBFS, expected ${EXPECTED_DB.toFixed(1)} ± ${LEVEL_TOL_DB}`,
        );
      }
    }
  });
}

/**
 * concealed = lost + late for every stream since it began, read when nothing is in flight
 * (`settled`: no loss being made, the counters steady). Not over a window that starts mid-loss:
 * a number already counted lost (a later one arrived) but not yet passed by playout is
 * concealed only afterwards, so differences of two reads taken under loss need not add up.
 */
function checkAccounting(settled, label) {
  members.forEach((m, i) => {
    for (const [name, p] of Object.entries(settled[i].peers)) {
      assert.equal(
        p.concealed,
        p.lost + p.late,
        `${label}: ${m.name} ← ${name}: concealed ${p.concealed}, lost ${p.lost} + late ${p.late}`,
      );
    }
  });
}

test(
  'three pages through 2 % loss in runs and ±3 ms: targets below 2× the oracle, tones at their level, loss counted exactly',
  { skip, timeout: 150_000 },
  async () => {
    // The room forms first (how links come up under loss is the mesh's business, not this
    // test's), then the network turns bad and the buffers have the warm-up to follow it.
    for (const p of PLAYERS) members.push({ ...p, page: await joinRoom(h, ROOM, p, logs) });
    await waitForRoomOf(members.map((m) => m.page));
    impairer = await startImpairer({ ...IMPAIR, durationS: 240 });
    await sleep(WARMUP_MS);

    const before = await all();
    let worst = { ratio: 0, line: '' };
    for (let s = 0; s < WATCH_S; s++) {
      await sleep(1000);
      const now = await all();
      now.forEach((c, i) => {
        for (const [name, p] of Object.entries(c.peers)) {
          assert.ok(p.oracleMs > 0, `${members[i].name} ← ${name}: no oracle yet (${JSON.stringify(p)})`);
          const ratio = p.targetMs / p.oracleMs;
          const line = `${members[i].name} ← ${name}: target ${p.targetMs.toFixed(2)} ms, oracle ${p.oracleMs.toFixed(2)} ms (${ratio.toFixed(2)}×) at ${s + 1} s`;
          if (ratio > worst.ratio) worst = { ratio, line };
          assert.ok(ratio < MAX_TARGET_OVER_ORACLE, line);
        }
      });
    }
    console.log(`impaired: highest target/oracle ${worst.line}`);
    await checkTones('impaired');
    const stats = await impairer.stop();
    impairer = null;
    const after = await settledCounters();

    let lost = 0,
      expected = 0;
    members.forEach((m, i) => {
      for (const name of Object.keys(after[i].peers)) {
        const l = delta(before, after, i, name, 'lost');
        const r = delta(before, after, i, name, 'received');
        lost += l;
        expected += l + r;
        console.log(
          `impaired: ${m.name} ← ${name}: received ${r}, lost ${l}, concealed ${delta(before, after, i, name, 'concealed')}, late ${delta(before, after, i, name, 'late')}, underruns ${delta(before, after, i, name, 'underruns')} (late ${delta(before, after, i, name, 'lateUnderruns')}, stall ${delta(before, after, i, name, 'stallUnderruns')})`,
        );
      }
    });
    const engines = lost / expected;
    const made = stats.dropped_loss / stats.packets_seen;
    console.log(
      `impaired: the engines counted ${(100 * engines).toFixed(2)} % lost of ${expected} packets; the impairer dropped ${(100 * made).toFixed(2)} % of ${stats.packets_seen}`,
    );
    assert.ok(lost > 0, 'the engines counted the losses');
    assert.ok(
      Math.abs(engines - made) <= LOSS_TOL,
      `engines ${(100 * engines).toFixed(2)} %, impairer ${(100 * made).toFixed(2)} %`,
    );
    checkAccounting(after, 'impaired');
  },
);

test(
  'opening the stats view does not disturb the audio of the page that opens it',
  { skip, timeout: 90_000 },
  async () => {
    // What opening the view could disturb is its own page: the audio device missing callbacks
    // (the audio thread starved: a capture gap of our own) or the packet pump held up (every
    // peer's packets stopping and resuming together: a local stall), each of which the engine
    // counts. Underruns anywhere in the room over the same seconds are printed beside them: on
    // this 2-core machine the threads that carry packets are late now and then whether or not a
    // view opens (the figures say which stream and why).
    assert.equal(members.length, 3, 'the room of the first test');
    const page = members[0].page;
    // Three openings must be clean. A stall of the whole machine disturbs a page now and then
    // whatever it shows (once in 15 openings here), so an opening that saw one is counted and
    // tried again, up to six openings in all; a view that costs the page its callbacks fails.
    let clean = 0;
    const disturbed = [];
    for (let round = 1; round <= 6 && clean < 3; round++) {
      await sleep(2000);
      const before = await all();
      await page.getByTestId('stats-toggle').click();
      await page.getByTestId('stats-table').waitFor();
      await sleep(5000);
      const after = await all();
      const own = (f) => after[0].own[f] - before[0].own[f];
      const lines = members.map(
        (m, i) =>
          `${m.name}: ${after[i].own.underruns - before[i].own.underruns} underruns (` +
          Object.keys(after[i].peers)
            .map(
              (n) =>
                `← ${n}: late ${delta(before, after, i, n, 'lateUnderruns')}, stall ${delta(before, after, i, n, 'stallUnderruns')}`,
            )
            .join('; ') +
          ')',
      );
      const line = `stats view opened on ${members[0].name} (${round}): capture gaps ${own('captureGaps')}, local stalls ${own('localStalls')}; ${lines.join(', ')}`;
      console.log(line);
      if (own('captureGaps') === 0 && own('localStalls') === 0) clean++;
      else disturbed.push(line);
      await page.getByTestId('stats-toggle').click();
    }
    assert.equal(
      clean,
      3,
      `${members[0].name}'s audio device missed callbacks or its pump stalled while the view opened:\n${disturbed.join('\n')}`,
    );
  },
);

test(
  `a sender misses ${CAPTURE_GAP_MS} ms of callbacks: it and every listener count the gap, and the figures add up`,
  { skip, timeout: 60_000 },
  async () => {
    const sender = member('Bo');
    const before = await settledCounters();
    await sender.page.evaluate(async (ms) => {
      // The session's private audio context, reached by name on purpose: this test stalls it.
      const ctx = window.tutti.session['ctx'];
      if (!ctx) throw new Error('the session has no audio context');
      await ctx.suspend();
      await new Promise((r) => setTimeout(r, ms));
      await ctx.resume();
    }, CAPTURE_GAP_MS);
    await sleep(3000);
    const after = await settledCounters();
    const i = members.indexOf(sender);
    const own = after[i].own.captureGaps - before[i].own.captureGaps;
    const ownMs = after[i].own.captureGapMs - before[i].own.captureGapMs;
    console.log(`capture gap: ${sender.name} counts ${own} gap(s), ${ownMs.toFixed(1)} ms`);
    assert.equal(own, 1, `${sender.name}'s own capture gaps`);
    // The context stops and starts on the audio thread's next callbacks: about the time asked.
    assert.ok(ownMs >= CAPTURE_GAP_MS / 2 && ownMs <= CAPTURE_GAP_MS * 2, `${sender.name}'s gap ${ownMs} ms`);
    for (const j of listeners(sender.name)) {
      const d = (f) => delta(before, after, j, sender.name, f);
      const line = `${members[j].name} ← ${sender.name}: sender gaps ${d('senderGaps')} (${d('senderGapMs').toFixed(1)} ms), underruns ${d('underruns')} (late ${d('lateUnderruns')}), lost ${d('lost')}, concealed ${d('concealed')}, late ${d('late')}`;
      console.log(`capture gap: ${line}`);
      assert.equal(d('senderGaps'), 1, line);
      // Both read the same send stamps (1 ms steps), each through the minima of its own half-second
      // windows, which one late callback of this 10 ms device can move: each within one callback
      // of the gap, so within two of each other, one late callback on either side (measured on a
      // loaded 2-core machine: sender 92.3 ms, listener 103.2 ms, for 100 ms asked).
      assert.ok(
        Math.abs(d('senderGapMs') - ownMs) <= 2 * CALLBACK_MS,
        `${line}: the listener's gap against the sender's ${ownMs.toFixed(1)} ms`,
      );
      // Nothing was lost: the sender's numbers went on where its audio did. Playout ran dry
      // waiting for the packet after the gap (at least once: the resumed device may deliver its
      // first callbacks unevenly), and every underrun ended with the packet it waited for.
      assert.equal(d('lost'), 0, line);
      assert.equal(d('concealed'), d('late'), line);
      assert.ok(d('underruns') >= 1, line);
      assert.equal(d('underruns'), d('lateUnderruns') + d('stallUnderruns'), line);
      // The others' streams are untouched.
      for (const other of Object.keys(after[j].peers).filter((n) => n !== sender.name)) {
        assert.equal(delta(before, after, j, other, 'underruns'), 0, `${members[j].name} ← ${other}`);
      }
    }
  },
);

test(
  `a sender cut off for ${OUTAGE_MS} ms: its stream restarts, the numbers skipped are lost and concealed alike`,
  { skip, timeout: 60_000 },
  async () => {
    const sender = member('Cy');
    // The sender's end of each of its links: the UDP ports its packets leave from.
    const ports = await sender.page.evaluate(async () => {
      /** @type {number[]} */
      const out = [];
      // The session's private mesh and its links, reached by name on purpose: the test reads
      // each connection's selected candidate pair.
      const links = window.tutti.session['mesh']?.['links'];
      if (!links) throw new Error('the session has no mesh');
      for (const link of links.values()) {
        const report = await link.pc.getStats();
        /** @type {string | null} */
        let pairId = null;
        for (const s of report.values()) {
          if (s.type === 'transport' && s.selectedCandidatePairId) pairId = s.selectedCandidatePairId;
        }
        const pair = pairId && report.get(pairId);
        const local = pair && report.get(pair.localCandidateId);
        if (local) out.push(local.port);
      }
      return out;
    });
    assert.equal(ports.length, 2, `the sender's two links: ports ${JSON.stringify(ports)}`);
    const before = await settledCounters();
    const cut = await dropUdpFrom(ports);
    await sleep(OUTAGE_MS);
    await cut.restore();
    await sleep(3000);
    const after = await settledCounters();
    for (const j of listeners(sender.name)) {
      const d = (f) => delta(before, after, j, sender.name, f);
      const line = `${members[j].name} ← ${sender.name}: lost ${d('lost')}, concealed ${d('concealed')}, late ${d('late')}, underruns ${d('underruns')}, resets ${d('resets')}, received ${d('received')}`;
      console.log(`outage: ${line}`);
      // What the outage cost is loss: at most its length's worth (the sender's data channel may
      // hold some of its packets while no acknowledgement comes, and deliver them after).
      assert.ok(
        d('lost') >= 1 && d('lost') <= (OUTAGE_MS / 1000) * RATE + 10,
        `${line}: up to ${(OUTAGE_MS / 1000) * RATE} lost`,
      );
      assert.equal(d('concealed'), d('lost') + d('late'), line);
      assert.equal(d('underruns'), 1, line);
      assert.equal(d('resets'), 0, `${line}: the numbering went on, no reset`);
    }
    checkAccounting(after, 'outage');
    await checkTones('after the outage');
    assert.deepEqual(logs, []);
  },
);

// A test that failed midway leaves the impairer running: stop it (the namespace ends with us).
after(async () => {
  await impairer?.stop().catch(() => {});
});
