// End-to-end test of a room: five pages of headless Chromium join one room through its link,
// against the real server binary, with real WebRTC data channels on loopback and the real
// engine worklet. Each page's microphone is a tone of its own, handed to getUserMedia by the
// test (an oscillator in the page's AudioContext into a MediaStreamDestination); from the
// MediaStream on, the product's own capture path runs. (A fake-capture WAV per browser would
// need five browsers, whose extra processes this 2-core machine cannot carry beside the room.)
// What each page's engine sends to its output is captured by the app's output tap.
//
// Checks, in order:
// 1. the room forms: every page sees four connected participants;
// 2. after warm-up, every page's output holds the four other tones at the expected level and
//    not its own; over SOAK_SECONDS (10 s, TUTTI_SOAK_SECONDS to change) no page's engine counts
//    an underrun;
// 3. one page leaves: the others drop it and, over a capture spanning the leave, the remaining
//    tones have no gap (no 20 ms window more than GAP_DB below the tone's median); it rejoins and
//    is heard again;
// 4. the server is stopped and started again on the same port: audio keeps playing while it is
//    down, and the room re-forms with the same peers on the same links;
// 5. wrong password, full room and malformed signaling messages each give their stated error;
// 6. two pages leave, and the three that stay each hear the two others at their level after
//    SOAK_SECONDS; underruns meanwhile are printed and judged as glitches (below). A sender
//    whose send queue towards a page stopped draining (an SCTP association that no longer takes
//    data while the connection says connected; seen after the starved five-page intervals) must
//    have been found and its link made anew by the mesh, the audio resuming within
//    STALL_RECOVERY_S; the restarts are printed;
// 7. the mesh's stall recovery end to end, with the stall simulated at the pump boundary (see
//    that test for what is real): found within STALL_DETECT_S, audio back within
//    STALL_RECOVERY_S, whichever side of the link stalls.
//
// Glitches (underruns, gaps in a tone) are checked where the machine can carry the room. Five
// browsers' audio, WebRTC and rendering keep two cores 75-98% busy, and the threads that carry
// packets are starved now and then (the figures printed show it): there, glitches are printed
// with the figures (CPU use, buffer depths, gaps between packets, underruns per peer) and the
// check is reported as skipped, never as passed; every functional check (who is connected to whom,
// the room re-forming, no page hearing itself, no tone missing from a capture unless the CPU was
// at least STARVED_PCT busy meanwhile or the server down) is strict, a tone below its level is a
// glitch (measured 2026-11-26: 1.5-2.5 dB low after the warm-up with the CPU 99 % busy, with this
// buffer and the one before; one tone 20 dB low after a rejoin at 100 %). The three-page soak at the end (CPU 40-45 % busy) judges its underruns the same way: the adaptive
// buffers conceal a lone stall of this machine rather than deepen for it, and here such stalls
// come every 20-60 s (TUTTI_ROOM_STRICT=1 makes every glitch a failure).
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { cpus } from 'node:os';
import { test } from 'node:test';
import { DIST } from '../kit/browser.mjs';
import { measureOutputTones, toneMicrophone } from '../kit/audio.mjs';
import { counterDelta, pageCounters } from '../kit/counters.mjs';
import { busyPct, cpuTimes } from '../kit/cpu.mjs';
import { ROOM_FLAGS, serverAndBrowser, waitFor } from '../kit/harness.mjs';
import { startServer } from '../kit/server.mjs';

const TONES = [220, 330, 440, 550, 660];
/** Frequencies between the tones: what the output holds there is its floor (noise, artifacts). */
const BETWEEN = [275, 385, 495, 605];
/** Amplitude of each page's tone at its source (-20 dBFS). */
const AMPLITUDE = 0.1;
/** A remote tone arrives at AMPLITUDE x the centre pan gain (constant power: cos(pi/4)). */
const EXPECTED_DB = 20 * Math.log10(AMPLITUDE * Math.SQRT1_2);
/** Level tolerance of a remote tone against EXPECTED_DB. */
const LEVEL_TOL_DB = 1.5;
/** A page's own tone must stay this far below the expected level of a remote one, or else no
 * more than OWN_OVER_FLOOR_DB above the output's floor between the tones (it is not there, only
 * the broadband residue of concealed blocks is). */
const OWN_BELOW_DB = 40;
const OWN_OVER_FLOOR_DB = 6;
/**
 * A 20 ms window this far below a tone's median level is a gap: the tone is missing (silence,
 * or a peer dropped). Shallower dips, down to DIP_DB, are glitches (a late block concealed and
 * cross-faded back, or the test's own microphone bridge between two audio contexts stalling on
 * a busy machine): they are printed with the figures, not failed.
 */
const GAP_DB = 20;
const DIP_DB = 6;
const SOAK_SECONDS = Number(process.env.TUTTI_SOAK_SECONDS ?? 10);
/**
 * CPU busy (% of all cores) over a capture from which on the machine counts as starved: a tone
 * missing from such a capture is a glitch line too (a stream that ran dry for most of it), not
 * a failure. Who is connected to whom is checked strictly apart.
 */
const STARVED_PCT = 95;
/** Glitches are reported with figures (see above); TUTTI_ROOM_STRICT=1 fails them. */
const STRICT = process.env.TUTTI_ROOM_STRICT === '1';
/** Block size every page sends, set through the app's own audio settings (TUTTI_ROOM_BLOCK). */
const BLOCK = Number(process.env.TUTTI_ROOM_BLOCK ?? 128);
/**
 * Warm-up after the room forms, and after a rejoin: on a starved machine the adaptive buffers
 * learn the longest stalls only by meeting them, which takes a few tens of seconds. `npm test`'s
 * time is bounded, so it waits 12 s: a starved run's glitches are printed and skipped either
 * way (below), and the functional checks do not depend on it. TUTTI_WARMUP_SECONDS=30 and
 * TUTTI_SOAK_SECONDS=60 for a longer look; `npm run soak` has the long run through the hub.
 */
const WARMUP_MS = Number(process.env.TUTTI_WARMUP_SECONDS ?? 12) * 1000;
const ROOM = 'e2e-quintet';
/**
 * Longest a sender may send nothing towards a page while packets wait (its send queue stalled)
 * before the audio resumes: the mesh finds a stall after 2 s with no byte leaving
 * (app/src/net/send-stall.ts, looked at every 500 ms), then makes the link anew.
 */
const STALL_RECOVERY_S = 5;
/** Longest from a simulated stall to the mesh's restart of the link. */
const STALL_DETECT_S = 4;

/** @type {{ name: string, tone: number, page: import('playwright-core').Page, logs: string[] }[]} */
const members = [];
const h = serverAndBrowser(ROOM_FLAGS);

/** Opens the room link in a fresh browser context and joins as `name`. */
async function joinPage(name, tone, room = ROOM, password = '') {
  const context = await h.browser.newContext();
  await context.grantPermissions(['microphone']);
  await context.addInitScript(toneMicrophone, { freq: tone, amplitude: AMPLITUDE });
  await context.addInitScript((blockFrames) => {
    const audio = { inputDeviceId: '', outputDeviceId: '', channels: 2, blockFrames };
    localStorage.setItem('tutti.audio', JSON.stringify(audio));
  }, BLOCK);
  const page = await context.newPage();
  /** @type {string[]} */
  const logs = [];
  page.on('console', (m) => logs.push(`${name} console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`${name} pageerror: ${e.message}`));
  await page.goto(`${h.server.url}r/${room}?ice=loopback`);
  await page.getByTestId('display-name').fill(name);
  if (password) await page.getByTestId('password').fill(password);
  await page.getByTestId('join').click();
  return { name, tone, page, logs };
}

/** The page's view of the room: names of connected participants, signaling state, error. */
async function roomState(page) {
  return page.evaluate(() => {
    const s = window.tutti?.session;
    if (!s) return null;
    const v = s.view;
    return {
      signaling: v.signaling,
      joined: v.joined,
      error: v.error,
      self: v.self.peer,
      connected: v.participants
        .filter((p) => p.link === 'connected')
        .map((p) => p.name)
        .sort(),
      peers: v.participants.map((p) => p.peer).sort(),
      pump: s.pumpThread,
    };
  });
}

async function waitForRoom(list, timeoutMs = 30000) {
  return waitFor(
    `room of ${list.length} formed`,
    async () => {
      const states = await Promise.all(list.map((m) => roomState(m.page)));
      const ok = states.every(
        (s, i) =>
          s &&
          s.signaling === 'open' &&
          s.connected.length === list.length - 1 &&
          !s.connected.includes(list[i].name),
      );
      return { ok, states };
    },
    timeoutMs,
  );
}

/** Each tone of the room and the frequencies between them, in `seconds` of a page's output. */
function measureTones(page, seconds) {
  return measureOutputTones(page, seconds, [...TONES, ...BETWEEN]);
}

/** A page's send figures by peer, from its counters: packets sent and skipped towards each. */
function sendFigures(counters) {
  return Object.fromEntries(
    Object.entries(counters.perPeer).map(([peer, p]) => [
      peer,
      { sent: p.txPackets ?? 0, skipped: p.txSkipped ?? 0 },
    ]),
  );
}

/** The mesh's restarts of each of a page's links, by peer and reason (net/mesh.ts). */
function linkRestarts(page) {
  return page.evaluate(() => {
    const s = window.tutti.session;
    return Object.fromEntries(s.view.participants.map((p) => [p.peer.slice(0, 6), s.mesh?.restarts(p.peer)]));
  });
}

/**
 * The stretches in `polls` (per poll, per page, sendFigures) in which a page handed a peer's
 * channel no packet while the pump skipped packets for it: `{ page, peer, seconds }` each, the
 * polls `every` s apart. A changed sent count (up, or back to 0 for a new channel) ends one.
 */
function sendStalls(polls, every) {
  const out = [];
  const open = new Map();
  for (let k = 1; k < polls.length; k++) {
    polls[k].forEach((byPeer, page) => {
      for (const [peer, f] of Object.entries(byPeer)) {
        const was = polls[k - 1][page][peer];
        const key = `${page} ${peer}`;
        const stuck = was && f.sent === was.sent && f.skipped > was.skipped;
        if (stuck) open.set(key, (open.get(key) ?? 0) + 1);
        if ((!stuck || k === polls.length - 1) && open.has(key)) {
          out.push({ page, peer, seconds: open.get(key) * every });
          open.delete(key);
        }
      }
    });
  }
  return out;
}

/**
 * Each tone of `present` at EXPECTED_DB ± LEVEL_TOL_DB, and `own` absent. With `glitches` (the
 * five-page intervals whose glitches are judged apart, see above), a tone that is there but low
 * (less than GAP_DB below its level: concealed or late blocks lower a short capture's median) is
 * a glitch line instead of a failure; a missing one too with `missingIsGlitch` (a capture taken
 * during a disruption on a starved machine, where a stream may run dry for most of it). A
 * missing tone otherwise, a too loud one, or a page's own tone in its output, fails.
 */
function checkTones(
  report,
  own,
  present,
  label,
  glitches = /** @type {string[] | null} */ (null),
  { missingIsGlitch = false } = {},
) {
  for (const f of present) {
    const db = report.tones[f].db;
    const missing = db <= EXPECTED_DB - GAP_DB;
    if (glitches && db < EXPECTED_DB - LEVEL_TOL_DB && (!missing || missingIsGlitch)) {
      glitches.push(
        `${label}: tone ${f} Hz at ${db.toFixed(1)} dBFS, ${(EXPECTED_DB - db).toFixed(1)} dB low${missing ? ' (missing most of the capture)' : ''}`,
      );
      continue;
    }
    assert.ok(
      Math.abs(db - EXPECTED_DB) <= LEVEL_TOL_DB,
      `${label}: tone ${f} Hz at ${db.toFixed(1)} dBFS, expected ${EXPECTED_DB.toFixed(1)} ± ${LEVEL_TOL_DB}`,
    );
  }
  if (own !== null) {
    const db = report.tones[own].db;
    const floor = Math.max(...BETWEEN.map((f) => report.tones[f].db));
    assert.ok(
      db < EXPECTED_DB - OWN_BELOW_DB || db <= floor + OWN_OVER_FLOOR_DB,
      `${label}: its own tone ${own} Hz is audible at ${db.toFixed(1)} dBFS (floor between the tones ${floor.toFixed(1)} dBFS)`,
    );
  }
}

/** The gaps in `report`: `{ tone, line }` each; empty when there is none. */
function findGaps(report, present, label) {
  const gaps = [];
  for (const f of present) {
    const w = [...report.tones[f].windows].sort((a, b) => a - b);
    const median = w[Math.floor(w.length / 2)];
    const min = w[0];
    const dips = w.filter((x) => x < median - DIP_DB).length;
    if (dips > 0)
      console.log(
        `${label}: tone ${f} Hz: ${dips} dip(s) of 20 ms below ${-DIP_DB} dB, deepest ${(min - median).toFixed(1)} dB`,
      );
    if (min < median - GAP_DB) {
      gaps.push({
        tone: f,
        line: `${label}: tone ${f} Hz dips to ${min.toFixed(1)} dB against its median ${median.toFixed(1)} dB`,
      });
    }
  }
  return gaps;
}

/** Peer id of each page's tone. */
async function peersByTone() {
  const ids = await Promise.all(members.map(async (m) => (await roomState(m.page)).self));
  return new Map(members.map((m, i) => [m.tone, ids[i]]));
}

/** Lines for the gaps pages heard over an interval, with that peer's underruns meanwhile. */
function gapLines(gaps, before, after, byTone) {
  return gaps.map(({ page, gap }) => {
    const peer = byTone.get(gap.tone);
    const u = (after[page].perPeer[peer]?.underruns ?? 0) - (before[page].perPeer[peer]?.underruns ?? 0);
    return `${gap.line} (${u} underruns of that peer meanwhile)`;
  });
}

/**
 * The verdict on audio glitches seen over an interval. None: pass. Some: with `strict`, a
 * failure; else printed with the figures and the check reported as skipped (never passed).
 */
function glitchVerdict(t, glitches, busy, figures, strict) {
  if (glitches.length === 0) return;
  const detail = `${glitches.join('\n')}\nCPU busy ${busy.toFixed(0)}% of ${cpus().length} cores over the interval.\n${figures}`;
  if (strict) assert.fail(`audio glitches:\n${detail}`);
  console.log(
    `GLITCHES, ${members.length} pages on ${cpus().length} cores (${busy.toFixed(0)}% CPU busy):\n${detail}`,
  );
  t.skip(
    `${glitches.length} glitch line(s) with ${members.length} pages at ${busy.toFixed(0)}% CPU, figures printed above`,
  );
}

function dumpLogs() {
  return members.flatMap((m) => m.logs.slice(-20)).join('\n');
}

test(
  'five pages join one room by its link and each hears the four others, not itself',
  { timeout: 180_000 + WARMUP_MS },
  async (t) => {
    for (let i = 0; i < TONES.length; i++) members.push(await joinPage(`Player ${i + 1}`, TONES[i]));
    try {
      await waitForRoom(members, 45000);
    } catch (e) {
      throw new Error(`${e instanceof Error ? e.message : e}\n${dumpLogs()}`, { cause: e });
    }
    const pumps = await Promise.all(members.map(async (m) => (await roomState(m.page)).pump));
    assert.deepEqual(pumps, Array(5).fill('worker'), 'the packet pump runs in the net worker');

    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const cpu0 = cpuTimes();
    const reports = await Promise.all(members.map((m) => measureTones(m.page, 2)));
    const busy = busyPct(cpu0, cpuTimes());
    const low = [];
    reports.forEach((r, i) => {
      const own = members[i].tone;
      checkTones(
        r,
        own,
        TONES.filter((f) => f !== own),
        members[i].name,
        low,
        { missingIsGlitch: busy >= STARVED_PCT },
      );
    });
    glitchVerdict(t, low, busy, 'after the warm-up', STRICT);
  },
);

test(
  `no underruns over ${SOAK_SECONDS} s after warm-up`,
  { timeout: 60_000 + SOAK_SECONDS * 1000 },
  async (t) => {
    const before = await Promise.all(members.map((m) => pageCounters(m.page)));
    const cpu0 = cpuTimes();
    await new Promise((r) => setTimeout(r, SOAK_SECONDS * 1000));
    const busy = busyPct(cpu0, cpuTimes());
    const afterSoak = await Promise.all(members.map((m) => pageCounters(m.page)));
    const lines = [];
    let underruns = 0;
    afterSoak.forEach((a, i) => {
      const d = counterDelta(before[i], a);
      underruns += d.underruns;
      const peers = d.peers.map(
        (p) =>
          `${p.peer.slice(0, 6)}: gaps max ${p.gapMaxMs.toFixed(0)} ms, >20ms ${p.gapsOver20Ms}, buf ${p.bufferedMs.toFixed(1)}/${p.targetMs.toFixed(1)} ms, ` +
          `lost ${p.lost}/${p.received}, underruns ${p.underruns}`,
      );
      lines.push(`${members[i].name}: underruns ${d.underruns}, quanta ${d.quanta}; ${peers.join('; ')}`);
    });
    console.log(`soak ${SOAK_SECONDS} s, CPU busy ${busy.toFixed(0)}%:\n${lines.join('\n')}`);
    glitchVerdict(
      t,
      underruns > 0 ? [`${underruns} underruns during the soak`] : [],
      busy,
      lines.join('\n'),
      STRICT,
    );
  },
);

test(
  'a page leaves without a gap in the others, and rejoins',
  { timeout: 120_000 + WARMUP_MS },
  async (t) => {
    const leaver = members[4];
    const stay = members.slice(0, 4);
    const byTone = await peersByTone();
    const countersBefore = await Promise.all(stay.map((m) => pageCounters(m.page)));
    const cpu0 = cpuTimes();
    const capturing = stay.map((m) => measureTones(m.page, 3));
    await new Promise((r) => setTimeout(r, 1000));
    await leaver.page.getByTestId('leave').click();
    const reports = await Promise.all(capturing);
    const busy = busyPct(cpu0, cpuTimes());
    const countersAfter = await Promise.all(stay.map((m) => pageCounters(m.page)));
    await waitForRoom(stay, 15000);
    // The others kept every remaining tone and dropped the leaver's.
    const low = [];
    reports.forEach((r, i) => {
      const present = TONES.filter((f) => f !== stay[i].tone && f !== leaver.tone);
      checkTones(r, null, present, `${stay[i].name} while ${leaver.name} left`, low, {
        missingIsGlitch: busy >= STARVED_PCT,
      });
    });
    const gaps = reports.flatMap((r, i) =>
      findGaps(
        r,
        TONES.filter((f) => f !== stay[i].tone && f !== leaver.tone),
        `${stay[i].name} while ${leaver.name} left`,
      ).map((gap) => ({ page: i, gap })),
    );

    await leaver.page.context().close();
    members[4] = await joinPage(leaver.name, leaver.tone);
    await waitForRoom(members, 30000);
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    const cpu1 = cpuTimes();
    const again = await Promise.all(members.map((m) => measureTones(m.page, 1.5)));
    const starved = busyPct(cpu1, cpuTimes()) >= STARVED_PCT;
    again.forEach((r, i) => {
      const own = members[i].tone;
      checkTones(
        r,
        own,
        TONES.filter((f) => f !== own),
        `${members[i].name} after the rejoin`,
        low,
        { missingIsGlitch: starved },
      );
    });
    glitchVerdict(
      t,
      [...low, ...gapLines(gaps, countersBefore, countersAfter, byTone)],
      busy,
      'while a page left',
      STRICT,
    );
  },
);

test(
  'the server restarts mid-session: audio continues and the room re-forms',
  { timeout: 120_000 },
  async (t) => {
    const peersBefore = await Promise.all(members.map(async (m) => (await roomState(m.page)).peers));
    const port = h.server.port;
    const code = await h.server.stop();
    const byTone = await peersByTone();
    const countersBefore = await Promise.all(members.map((m) => pageCounters(m.page)));
    const cpu0 = cpuTimes();
    const whileDown = async () => {
      const { gaps, low } = await checkWhileDown();
      const busy = busyPct(cpu0, cpuTimes());
      const countersAfter = await Promise.all(members.map((m) => pageCounters(m.page)));
      return { gaps, low, busy, countersAfter };
    };
    // The server comes back whatever the checks while it was down found.
    const { gaps, low, busy, countersAfter } = await whileDown().finally(async () => {
      // As the harness started it: this file studies the mesh (see serverAndBrowser).
      h.server = await startServer({ dist: DIST, port, args: ['--hub-auto', 'false'] });
    });
    assert.equal(code, 0, 'the server exits cleanly on SIGTERM');
    await waitForRoom(members, 20000);
    const peersAfter = await Promise.all(members.map(async (m) => (await roomState(m.page)).peers));
    assert.deepEqual(peersAfter, peersBefore, 'the same peers, on the same links');
    glitchVerdict(
      t,
      [...low, ...gapLines(gaps, countersBefore, countersAfter, byTone)],
      busy,
      'while the server was down',
      STRICT,
    );
  },
);

/** While the server is down: every page keeps hearing the four others (glitches returned). */
async function checkWhileDown() {
  const down = await Promise.all(members.map((m) => measureTones(m.page, 2)));
  const gaps = [];
  const low = [];
  down.forEach((r, i) => {
    const own = members[i].tone;
    const present = TONES.filter((f) => f !== own);
    checkTones(r, own, present, `${members[i].name} with the server down`, low, { missingIsGlitch: true });
    gaps.push(
      ...findGaps(r, present, `${members[i].name} with the server down`).map((gap) => ({ page: i, gap })),
    );
  });
  const states = await Promise.all(members.map((m) => roomState(m.page)));
  assert.ok(
    states.every((s) => s.signaling === 'reconnecting'),
    `pages notice: ${JSON.stringify(states.map((s) => s.signaling))}`,
  );
  return { gaps, low };
}

test(
  'wrong password, full room and malformed messages give their stated errors',
  { timeout: 120_000 },
  async () => {
    const locked = await joinPage('Keeper', 220, 'e2e-locked', 'open sesame');
    await waitFor(
      'the keeper joined',
      async () => ({ ok: (await roomState(locked.page))?.joined === true }),
      15000,
    );
    const intruder = await joinPage('Intruder', 330, 'e2e-locked', 'wrong');
    const err = intruder.page.getByTestId('room-error');
    await err.waitFor({ timeout: 15000 });
    assert.match((await err.textContent()) ?? '', /password/i);
    assert.equal((await roomState(intruder.page)).error.code, 'wrong-password');
    await intruder.page.context().close();
    await locked.page.context().close();

    // Full room: a second server with a cap of 2.
    // The socket is opened from a page of that server: the CSP lets a page reach its own origin
    // only, and the server refuses upgrades whose Origin is another one.
    const small = await startServer({ dist: DIST, args: ['--room-cap', '2'] });
    const page = await members[0].page.context().newPage();
    try {
      await page.goto(small.url);
      const replies = await page.evaluate(
        async (url) => {
          // Replies to `msgs`, once there is one per message (or, `untilClose`, once the server
          // closed the socket); the socket of a joined member stays open.
          const ask = (msgs, untilClose = false) =>
            new Promise((resolve) => {
              const ws = new WebSocket(url);
              const got = [];
              ws.onopen = () => msgs.forEach((m) => ws.send(m));
              ws.onmessage = (ev) => {
                got.push(JSON.parse(ev.data));
                if (got.length >= msgs.length && !untilClose) resolve(got);
              };
              ws.onclose = (ev) => resolve([...got, { closed: ev.code }]);
              setTimeout(() => resolve(got), 4000);
            });
          const id = (c) => c.repeat(32);
          const join = (p) =>
            JSON.stringify({ type: 'join', room: 'tiny', name: p, peer: id(p), token: id(p) });
          const a = await ask([join('a')]);
          const b = await ask([join('b')]);
          const c = await ask([join('c')]);
          const junk = await ask([
            '{not json',
            JSON.stringify({ type: 'dance' }),
            JSON.stringify({ type: 'join', room: 'x' }),
          ]);
          const big = await ask([JSON.stringify({ type: 'ping', pad: 'x'.repeat(70000) })], true);
          return { a, b, c, junk, big };
        },
        `${small.url.replace('http', 'ws')}ws`,
      );
      assert.equal(replies.a[0].type, 'welcome');
      assert.equal(replies.b[0].type, 'welcome');
      assert.equal(replies.c[0].code, 'room-full');
      assert.match(replies.c[0].message, /full/i);
      assert.deepEqual(
        replies.junk.map((m) => m.code),
        ['bad-json', 'unknown-type', 'bad-message'],
      );
      assert.equal(replies.big[0].code, 'too-large');
      // The server closes with 1009 and reads on until the browser's close frame, so the code
      // arrives even while the browser is still sending the rest of the frame.
      assert.equal(replies.big.at(-1).closed, 1009, JSON.stringify(replies.big.at(-1)));
    } finally {
      await page.close();
      await small.stop();
    }
  },
);

test(
  `three pages stay and play ${SOAK_SECONDS} s, each hearing the two others`,
  { timeout: 60_000 + SOAK_SECONDS * 1000 },
  async (t) => {
    // Who hears whom, at what level, is strict. Underruns are printed with their moments and the
    // figures and, when there are any, the check is reported as skipped (TUTTI_ROOM_STRICT=1 fails
    // them): the adaptive buffers conceal a lone stall of this shared machine rather than deepen
    // for it (core/src/jitter), and here such stalls come every 20-60 s, often in every page at
    // once (measured 2026-11-26: 1 underrun in each of the three pages in the same second, or 1
    // in one page, per 20 s soak; the buffer before the rework, which learnt a floor from
    // underruns, had none).
    for (const m of members.splice(3)) await m.page.context().close();
    await waitForRoom(members, 20000);
    await new Promise((r) => setTimeout(r, 5000));
    const before = await Promise.all(members.map((m) => pageCounters(m.page)));
    const cpu0 = cpuTimes();
    /** Per poll (every 250 ms): each page's underrun count and its send figures by peer. */
    const sendPolls = [before.map(sendFigures)];
    const polls = [before.map((c) => c.underruns)];
    const end = Date.now() + SOAK_SECONDS * 1000;
    while (Date.now() < end) {
      await new Promise((r) => setTimeout(r, 250));
      const now = await Promise.all(members.map((m) => pageCounters(m.page)));
      polls.push(now.map((c) => c.underruns));
      sendPolls.push(now.map(sendFigures));
    }
    const busy = busyPct(cpu0, cpuTimes());
    const afterSoak = await Promise.all(members.map((m) => pageCounters(m.page)));
    const reports = await Promise.all(members.map((m) => measureTones(m.page, 2)));
    reports.forEach((r, i) => {
      console.log(
        `${members[i].name} after the soak: ${r.frames} frames, peak ${r.peak.toFixed(3)}; ` +
          members.map((m) => `${m.tone} Hz ${r.tones[m.tone].db.toFixed(1)} dBFS`).join(', '),
      );
    });
    /** When each page's underruns began, s into the soak. */
    const rises = [];
    for (let k = 1; k < polls.length; k++) {
      polls[k].forEach((u, i) => {
        if (u > polls[k - 1][i]) rises.push(`${members[i].name} at ${(k / 4).toFixed(2)} s`);
      });
    }
    const lines = afterSoak.map((a, i) => {
      const d = counterDelta(before[i], a);
      const peers = d.peers.map(
        (p) =>
          `${p.peer.slice(0, 6)}: received ${p.received}, sent ${p.txPackets} ` +
          `(skipped ${p.txSkipped}, queue ${p.sendBufferedBytes} B), ` +
          `buf ${p.bufferedMs.toFixed(1)}/${p.targetMs.toFixed(1)} ms, underruns ${p.underruns} ` +
          `(late ${p.lateUnderruns}, stall ${p.stallUnderruns})`,
      );
      return `${members[i].name}: underruns ${d.underruns}; ${peers.join('; ')}`;
    });
    console.log(
      `three pages, ${SOAK_SECONDS} s, CPU busy ${busy.toFixed(0)}%:\n${lines.join('\n')}` +
        (rises.length ? `\nunderruns began: ${rises.join(', ')}` : ''),
    );
    // A send queue that stopped draining (an SCTP association that no longer takes data, seen
    // after the starved five-page intervals, measured at 66,000 bytes held for over 25 s) is the
    // mesh's to find and repair: every stretch in which a sender handed a peer's channel nothing
    // while packets waited must have ended within STALL_RECOVERY_S, and every tone is heard.
    const ids = await Promise.all(members.map(async (m) => (await roomState(m.page)).self));
    const restarts = await Promise.all(members.map((m) => linkRestarts(m.page)));
    const stalls = sendStalls(sendPolls, 0.25);
    console.log(
      `restarts by page and peer: ${JSON.stringify(restarts)}\n` +
        `send stalls (s without a packet sent while packets waited): ` +
        (stalls.length
          ? stalls
              .map((x) => `${members[x.page].name} -> ${x.peer.slice(0, 6)} ${x.seconds.toFixed(2)} s`)
              .join(', ')
          : 'none'),
    );
    for (const x of stalls) {
      assert.ok(
        x.seconds <= STALL_RECOVERY_S,
        `${members[x.page].name} sent nothing to ${x.peer.slice(0, 6)} for ${x.seconds.toFixed(2)} s while packets ` +
          `waited (over ${STALL_RECOVERY_S} s: the stall was not repaired); restarts ${JSON.stringify(restarts[x.page])}`,
      );
    }
    reports.forEach((r, i) => {
      const own = members[i].tone;
      checkTones(
        r,
        own,
        members.map((m) => m.tone).filter((f) => f !== own),
        `${members[i].name} after the soak`,
      );
    });
    assert.equal(new Set(ids).size, members.length);
    glitchVerdict(
      t,
      rises.length > 0 ? [`underruns with three pages: ${rises.join(', ')}`] : [],
      busy,
      lines.join('\n'),
      STRICT,
    );
  },
);

test(
  'a send queue that stops draining is found and the link made anew, whichever side stalls',
  { timeout: 120_000 },
  async () => {
    // What is real here and what is not: the stall is simulated at the pump boundary (the mesh's
    // test hook simulateSendStall: the pump takes that channel's queue to hold 66,000 bytes and
    // skips every packet towards the peer, as measured when an SCTP association stopped
    // draining; the channel itself is untouched). Everything after is the product's own path:
    // the mesh reads the pump's figures and finds the stall, the offerer restarts the link (or
    // the answerer asks it to, by signal through the server), a fresh peer connection carries
    // fresh channels to the pump, and the receiving page hears the sender's tone again.
    const ids = await Promise.all(members.slice(0, 2).map(async (m) => (await roomState(m.page)).self));
    const [offerer, answerer] = ids[0] < ids[1] ? [0, 1] : [1, 0];
    const figures = (page, peer) =>
      page.evaluate((p) => {
        const s = window.tutti.session;
        const mesh = s.mesh;
        if (!mesh) throw new Error('the session has no mesh');
        const c = s.counters().perPeer[p] ?? {};
        return { restarts: mesh.restarts(p), link: mesh.state(p), received: c.received ?? 0 };
      }, peer);
    const total = (r) => Object.values(r).reduce((a, b) => a + b, 0);
    for (const [from, to, side] of [
      [offerer, answerer, 'offerer'],
      [answerer, offerer, 'answerer'],
    ]) {
      const sender = members[from];
      const receiver = members[to];
      const before = await figures(sender.page, ids[to]);
      const peerBefore = await figures(receiver.page, ids[from]);
      const t0 = Date.now();
      const held = await sender.page.evaluate(
        (p) => window.tutti.session.mesh?.simulateSendStall(p) ?? false,
        ids[to],
      );
      assert.ok(held, `${sender.name} has a link to ${receiver.name}`);
      let detectedMs = null;
      let heardAtDetect = 0;
      let resumedMs = null;
      while (Date.now() - t0 < (STALL_DETECT_S + STALL_RECOVERY_S + 5) * 1000) {
        await new Promise((r) => setTimeout(r, 100));
        const [s, r] = await Promise.all([figures(sender.page, ids[to]), figures(receiver.page, ids[from])]);
        if (detectedMs === null && total(s.restarts) > total(before.restarts)) {
          detectedMs = Date.now() - t0;
          heardAtDetect = r.received;
        }
        // Resumed: the receiver has taken 0.25 s of the sender's packets on the new link.
        if (detectedMs !== null && r.received > heardAtDetect + 90) {
          resumedMs = Date.now() - t0;
          break;
        }
      }
      const after = await figures(sender.page, ids[to]);
      const peerAfter = await figures(receiver.page, ids[from]);
      const line =
        `${side} stalls (${sender.name} -> ${receiver.name}): found after ${detectedMs} ms, audio back after ` +
        `${resumedMs} ms; restarts ${sender.name} ${JSON.stringify(after.restarts)}, ${receiver.name} ` +
        `${JSON.stringify(peerAfter.restarts)}`;
      console.log(line);
      assert.ok(detectedMs !== null && detectedMs <= STALL_DETECT_S * 1000, `not found in time: ${line}`);
      assert.ok(
        resumedMs !== null && resumedMs - detectedMs <= STALL_RECOVERY_S * 1000,
        `audio not back in time: ${line}`,
      );
      assert.equal(after.restarts['send-stall'] - before.restarts['send-stall'], 1, line);
      if (side === 'answerer') {
        // The offerer made the link anew at the answerer's request.
        assert.equal(peerAfter.restarts['peer-send-stall'] - peerBefore.restarts['peer-send-stall'], 1, line);
      }
      await waitFor(
        `${sender.name} and ${receiver.name} connected again`,
        async () => {
          const [s, r] = await Promise.all([
            figures(sender.page, ids[to]),
            figures(receiver.page, ids[from]),
          ]);
          return { ok: s.link === 'connected' && r.link === 'connected', s, r };
        },
        15000,
      );
      const report = await measureTones(receiver.page, 2);
      checkTones(report, receiver.tone, [sender.tone], `${receiver.name} after ${sender.name}'s stall`);
    }
  },
);
