// Latency end to end: the per-stage histograms of a 3-page room on loopback (real server, real
// data channels, the real engine in its worklet), the network one-way estimate against RTT/2,
// and the round-trip probe — clicks sent to a peer that echoes them back, and through the sound
// check's loopback — against the sum of the stages the engines measured on the way. The browser
// plays on headless Chromium's own 10 ms device; TUTTI_LATENCY_BACKEND=pulse-128 runs it on a
// private sound server with 128-frame callbacks. (Three pages there keep this 2-core machine so
// busy that the pumps' clock exchanges, sent once a second to a thread that may wake late,
// read a median RTT of 4.5-4.7 ms where the audio packets' one-way time is 0.8-1.2 ms: the
// RTT/2 check fails on the machine, not on the measurement. The latency benchmark and
// tests/browser/audio-backend.test.mjs run on the sound server.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AUDIO_BACKENDS, isAudioBackend } from '../kit/browser.mjs';
import {
  collectLogs,
  joinRoom,
  MEDIA_FLAGS,
  ROOM_FLAGS,
  runSoundCheck,
  serverAndBrowser,
  toneContext,
  waitFor,
} from '../kit/harness.mjs';

const ROOM = 'e2e-latency';
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
  { name: 'Cy', tone: 770 },
];
const STAGES = ['jitterWait', 'network', 'delivery', 'sendQueue', 'transit', 'oneWay', 'mouthToEar'];
/** The bound: the network one-way estimate within this of RTT/2 on loopback, ms (best cases; see below). */
const NET_VS_RTT_TOL_MS = 1;
/**
 * A click's round trip against the sum of the stages, ms: the stages' medians are taken from
 * histograms (within 9 % of a bin), single delivery times are ±0.5 ms (the worklet's clock), and
 * the hop from the worklet to the pump is in no stage.
 */
const CLICK_TOL_MS = 2;
/** One 128-frame block, ms. */
const BLOCK_MS = (128 / 48000) * 1000;
/** Measuring windows tried for one without underruns (see the depth check). */
const WINDOWS = 3;
/** A latency histogram bin's width relative to its value (8 bins per octave, core/src/latency.rs). */
const BIN_WIDTH = 2 ** (1 / 8) - 1;
/**
 * The audio backend (tests/kit/chromium.mjs): headless Chromium's own device (10 ms callbacks
 * of three or four quanta) unless TUTTI_LATENCY_BACKEND names another ('pulse-128': a private
 * sound server with 128-frame callbacks; see the top of the file).
 */
const BACKEND = process.env.TUTTI_LATENCY_BACKEND ?? 'fake';
if (!isAudioBackend(BACKEND))
  throw new RangeError(`TUTTI_LATENCY_BACKEND=${BACKEND}: expected one of ${AUDIO_BACKENDS.join(', ')}`);
/** Every microphone tone of this file: the players' and the sound check's. */
const TONES = [...PLAYERS.map((p) => p.tone), 440];
const h = serverAndBrowser(
  [...ROOM_FLAGS, ...MEDIA_FLAGS, ...(process.env.TUTTI_EXTRA_FLAGS ?? '').split(' ').filter(Boolean)],
  { backend: BACKEND, tones: TONES },
);

/** Per page, per peer name: the stage histograms' summaries and the counters. */
async function figures(page) {
  return page.evaluate(() => {
    const s = window.tutti.session;
    const st = s.latencyStages();
    const c = s.counters();
    const sum = (x) =>
      x && {
        p50: x.p50,
        p95: x.p95,
        p99: x.p99,
        max: x.max,
        min: x.min,
        mean: x.mean,
        count: x.count,
        rejected: x.rejected,
      };
    return {
      capture: sum(st.local.capture),
      devices: st.devices,
      peers: Object.fromEntries(
        s.view.participants.map((p) => [
          p.name,
          {
            stages: Object.fromEntries(Object.entries(st.peers[p.peer] ?? {}).map(([k, v]) => [k, sum(v)])),
            counters: c.perPeer[p.peer],
          },
        ]),
      ),
    };
  });
}

function line(who, f) {
  return Object.entries(f.peers)
    .map(
      ([name, p]) =>
        `${who} ← ${name}: ` +
        Object.entries(p.stages)
          .map(([k, v]) => `${k} ${v.p50.toFixed(2)}/${v.p95.toFixed(2)} ms (${v.count})`)
          .join(', ') +
        `; RTT ${p.counters.rttMs?.toFixed(3)} ms, target ${p.counters.targetMs?.toFixed(2)} ms`,
    )
    .join('\n');
}

/** Waits until the round-trip probe `page` started has its ten clicks back, and returns its result. */
async function tenClicksBack(page) {
  const { probe } = await waitFor(
    'ten clicks back',
    async () => {
      const probe = await page.evaluate(() => window.tutti.session.probeResult());
      return { ok: probe?.state === 'done', probe };
    },
    30000,
    250,
  );
  return probe;
}

test(
  '3-page room: every stage fills, network one-way is RTT/2, and a click round trip is the sum of the stages',
  { timeout: 180_000 },
  async (ctx) => {
    const logs = [];
    const pages = [];
    for (const p of PLAYERS) pages.push(await joinRoom(h, ROOM, p, logs));
    await waitFor(
      'room of 3 with clock offsets',
      async () => {
        const n = await Promise.all(
          pages.map((page) =>
            page.evaluate(() => {
              const s = window.tutti?.session;
              if (!s) return 0;
              const c = s.counters();
              return s.view.participants.filter(
                (p) => p.link === 'connected' && p.format && Number.isFinite(c.perPeer[p.peer]?.offsetUs),
              ).length;
            }),
          ),
        );
        return { ok: n.every((x) => x === 2), n };
      },
      60000,
    );
    // Settle, then measure afresh for 6 s (the histograms are published once a second). The
    // wait stage is checked against the depth the buffer held below, which holds for a steady
    // buffer only: an underrun in the window (a stall of this shared machine) leaves packets
    // waiting longer than any depth sampled. Such a window is measured again, up to WINDOWS
    // times; a peer whose buffer underran in the last one has that one check reported, not
    // judged.
    await pages[0].waitForTimeout(3000);
    /**
     * Per page, per peer name, over the window: the depth the buffer held (jitter buffer plus the
     * resampler's staging, as the engine publishes it) and its target (ranges), and underruns.
     */
    let targets = [];
    let steady = false;
    for (let attempt = 1; attempt <= WINDOWS && !steady; attempt++) {
      const start = await Promise.all(
        pages.map((page) =>
          page.evaluate(() => {
            const s = window.tutti.session;
            s.resetLatency();
            const c = s.counters();
            return Object.fromEntries(s.view.participants.map((p) => [p.name, c.perPeer[p.peer].underruns]));
          }),
        ),
      );
      targets = pages.map(() => ({}));
      const until = Date.now() + 6000;
      let last = [];
      while (Date.now() < until) {
        last = await Promise.all(
          pages.map((page) =>
            page.evaluate(() => {
              const s = window.tutti.session;
              const c = s.counters();
              return Object.fromEntries(
                s.view.participants.map((p) => [
                  p.name,
                  {
                    t: c.perPeer[p.peer].targetMs,
                    b: c.perPeer[p.peer].bufferedMs,
                    u: c.perPeer[p.peer].underruns,
                  },
                ]),
              );
            }),
          ),
        );
        last.forEach((byName, i) => {
          for (const [name, { t, b }] of Object.entries(byName)) {
            const r = (targets[i][name] ??= {
              min: Infinity,
              max: -Infinity,
              heldMin: Infinity,
              heldMax: -Infinity,
              underruns: 0,
            });
            r.min = Math.min(r.min, t);
            r.max = Math.max(r.max, t);
            r.heldMin = Math.min(r.heldMin, b);
            r.heldMax = Math.max(r.heldMax, b);
          }
        });
        await pages[0].waitForTimeout(250);
      }
      last.forEach((byName, i) => {
        for (const [name, { u }] of Object.entries(byName)) targets[i][name].underruns = u - start[i][name];
      });
      const unsteady = targets.flatMap((byName, i) =>
        Object.entries(byName)
          .filter(([, r]) => r.underruns > 0)
          .map(
            ([name, r]) =>
              `${PLAYERS[i].name} ← ${name}: ${r.underruns} underruns, target ${r.min.toFixed(2)}..${r.max.toFixed(2)} ms`,
          ),
      );
      steady = unsteady.length === 0;
      if (!steady) console.log(`window ${attempt} of ${WINDOWS} not steady: ${unsteady.join('; ')}`);
    }
    const before = await Promise.all(pages.map(figures));
    for (const [i, f] of before.entries()) {
      console.log(
        `${line(PLAYERS[i].name, f)}\n${PLAYERS[i].name} capture ${f.capture.p50.toFixed(2)}/${f.capture.p95.toFixed(2)}/${f.capture.max.toFixed(2)} ms, devices ${JSON.stringify(f.devices)}`,
      );
    }
    for (const [i, f] of before.entries()) {
      const who = PLAYERS[i].name;
      assert.ok(f.capture.count > 1000, `${who}: capture intervals recorded (${f.capture.count})`);
      assert.ok(f.devices.outputMs > 0, `${who}: output latency known (${f.devices.outputMs} ms)`);
      assert.equal(Object.keys(f.peers).length, 2, `${who} sees two peers`);
      for (const [name, p] of Object.entries(f.peers)) {
        const at = `${who} ← ${name}`;
        for (const stage of STAGES) {
          assert.ok(p.stages[stage]?.count > 100, `${at}: ${stage} filled (${p.stages[stage]?.count})`);
        }
        // The one-way estimate against the clock exchanges, best case against best case: the
        // fastest packet's one-way delay against half the smallest RTT (the exchange the clock
        // offset comes from). The medians are printed, not judged: a ping travels alone, while
        // audio packets leave in bursts of a callback's 3-4 blocks to each peer and queue behind
        // each other in both browsers' network threads, so the packets' median sits above
        // RTT/2 by that queue (-0.2 to +1.1 ms in runs here), and where callbacks come one block at a time it
        // is the once-a-second ping that finds the threads cold (a median RTT of 4.5 ms against a
        // 1 ms one-way). Measured here: the fastest packet 0.17-0.44 ms, within 0.18 ms of min RTT/2.
        const halfRttMin = p.counters.rttMinMs / 2;
        console.log(
          `${at}: network one-way min ${p.stages.network.min.toFixed(3)} ms vs min RTT/2 ${halfRttMin.toFixed(3)} ms; ` +
            `p50 ${p.stages.network.p50.toFixed(3)} ms vs median RTT/2 ${(p.counters.rttMs / 2).toFixed(3)} ms`,
        );
        assert.ok(
          Math.abs(p.stages.network.min - halfRttMin) <= NET_VS_RTT_TOL_MS,
          `${at}: network one-way min ${p.stages.network.min} ms vs min RTT/2 ${halfRttMin} ms (±${NET_VS_RTT_TOL_MS})`,
        );
        // Transit is network + delivery + wait per packet, so the means add up — up to the packets
        // each stage counts: transit only those played with both times known, the wait every
        // packet played, network and delivery every packet received (late or discarded ones too).
        const parts = p.stages.network.mean + p.stages.delivery.mean + p.stages.jitterWait.mean;
        assert.ok(
          Math.abs(p.stages.transit.mean - parts) <= 1.5,
          `${at}: transit mean ${p.stages.transit.mean} vs network + delivery + wait ${parts}`,
        );
        // The wait stage against the buffer: the top of the wait distribution (the packets that
        // arrived earliest) is the depth the buffer holds them for: the jitter buffer's fill plus
        // the resampler's staging, which the engine publishes as the buffered depth. Within one
        // block of the range sampled over the window (it adapts), or within the histogram's
        // resolution where that is coarser (a stall can raise the depth to 60 ms and more, where a
        // bin is 9 % wide: 5 ms). How closely that depth follows the target is the buffer's own
        // policy, tested in core/: printed here, not judged (on 128-frame callbacks the target
        // moves by a quantum every few seconds and the depth follows at the drift loop's pace).
        const t = targets[i][name];
        const tol = Math.max(BLOCK_MS, BIN_WIDTH * t.heldMax);
        const depth =
          `${at}: jitter-buffer wait p99 ${p.stages.jitterWait.p99.toFixed(2)} ms vs depth held ` +
          `${t.heldMin.toFixed(2)}..${t.heldMax.toFixed(2)} ms (±${tol.toFixed(2)}; target ${t.min.toFixed(2)}..${t.max.toFixed(2)} ms)`;
        console.log(depth);
        if (t.underruns === 0)
          assert.ok(
            p.stages.jitterWait.p99 >= t.heldMin - tol && p.stages.jitterWait.p99 <= t.heldMax + tol,
            depth,
          );
        else {
          console.log(`not judged (${t.underruns} underruns in the window): ${depth}`);
          ctx.diagnostic(`not judged (${t.underruns} underruns in the window): ${depth}`);
        }
        // The added one-way latency adds the block and our send queue to each transit (the send
        // queue as last reported when the packet plays: its mean over played packets can differ
        // from its mean over sent ones when the pump stalls), and mouth to ear the devices.
        const extra = p.stages.oneWay.mean - p.stages.transit.mean;
        assert.ok(
          Math.abs(extra - BLOCK_MS - p.stages.sendQueue.mean) <= 1.5,
          `${at}: one-way − transit = ${extra} ms, expected block + send queue = ${BLOCK_MS + p.stages.sendQueue.mean} ms`,
        );
        const devices = f.devices.outputMs + (Number.isFinite(f.devices.inputMs) ? f.devices.inputMs : 0);
        const m2e = p.stages.mouthToEar.mean - p.stages.oneWay.mean;
        assert.ok(
          Math.abs(m2e - devices) < 1e-6,
          `${at}: mouth to ear − one-way = ${m2e} ms, expected the devices' ${devices} ms`,
        );
      }
    }

    // Peer loopback: Ana clicks, Bo allows the echo and echoes. The stages are measured afresh over
    // the same window.
    const [ana, bo] = pages;
    await Promise.all(pages.map((page) => page.evaluate(() => window.tutti.session.resetLatency())));
    const boId = await ana.evaluate(() => {
      const bo = window.tutti.session.view.participants.find((p) => p.name === 'Bo');
      if (!bo) throw new Error("Bo is not in Ana's room");
      return bo.peer;
    });
    assert.equal(await ana.evaluate((id) => window.tutti.session.startProbe(id), boId), true);
    // Bo is asked first; the clicks start once he allows the echo.
    await bo.getByTestId('echo-allow').click();
    const result = await tenClicksBack(ana);
    assert.ok(result, 'a probe result');
    const echoedBy = await bo.evaluate(() => window.tutti.session.echoing());
    const after = await Promise.all(pages.slice(0, 2).map(figures));
    const anaBo = after[0].peers.Bo.stages;
    const boAna = after[1].peers.Ana.stages;
    const stagesSum = anaBo.sendQueue.p50 + boAna.transit.p50 + boAna.sendQueue.p50 + anaBo.transit.p50;
    // Clicks leave at the start of an audio callback, but Bo echoes each in whichever quantum of
    // his callback it played: with callbacks of several quanta (headless Chromium's fake devices
    // run three or four every 10 ms) that is up to one callback less one quantum before the
    // quantum's audio time, which the stages (on the wall clock) do not see; the click's way back
    // is read on Ana's audio clock, which meets the wall clock only at her callbacks too (the self
    // loopback below reads 3-4 ms under its stages for that). Bound: one callback period (the top
    // of the capture intervals) below the sum, CLICK_TOL_MS either side. Runs on the fake device
    // read 6-8.4 ms below; on the sound server's 128-frame callbacks (one quantum each) 0.1-0.4 ms
    // above.
    const callbackMs = Math.max(after[0].capture.p99, after[1].capture.p99);
    const low = stagesSum - callbackMs - CLICK_TOL_MS;
    const high = stagesSum + CLICK_TOL_MS;
    console.log(
      `peer loopback Ana → Bo → Ana: ${result.heard}/${result.sent} clicks, round trips ${result.roundTripsMs.map((x) => x.toFixed(2)).join(' ')} ms, ` +
        `median ${result.medianMs.toFixed(2)} ms; stages: send ${anaBo.sendQueue.p50.toFixed(2)} + transit ${boAna.transit.p50.toFixed(2)} + send ${boAna.sendQueue.p50.toFixed(2)} + transit ${anaBo.transit.p50.toFixed(2)} = ${stagesSum.toFixed(2)} ms; Bo echoing: ${echoedBy}`,
    );
    assert.ok(result.heard >= 8, `clicks heard back: ${result.heard} of ${result.sent}`);
    assert.ok(
      result.medianMs >= low && result.medianMs <= high,
      `click round trip ${result.medianMs} ms vs the sum of the stages ${stagesSum} ms: expected ${low}..${high} (callback ${callbackMs} ms)`,
    );
    // The echo ends with the probe.
    await waitFor(
      'echo stopped',
      async () => ({ ok: (await bo.evaluate(() => window.tutti.session.echoing())) === null }),
      5000,
    );

    // Self loopback from the room: Cy measures his own loop from the stats view; the session makes
    // a loopback link for it and removes it afterwards.
    const cy = pages[2];
    await cy.getByTestId('stats-toggle').click();
    await cy.getByTestId('selfloop-start').click();
    const self = cy.getByTestId('selfloop-result');
    await self.waitFor({ timeout: 30000 });
    const selfFigures = {
      heard: Number(await self.getAttribute('data-heard')),
      engineMs: Number(await self.getAttribute('data-engine-ms')),
      outputMs: Number(await self.getAttribute('data-output-ms')),
      text: await self.innerText(),
    };
    console.log(`room self loopback (Cy): ${JSON.stringify(selfFigures)}`);
    assert.ok(selfFigures.heard >= 8, `self loopback in the room: ${selfFigures.heard} clicks heard`);
    assert.ok(
      selfFigures.engineMs >= BLOCK_MS && selfFigures.engineMs < 300,
      `engine round trip ${selfFigures.engineMs} ms`,
    );
    assert.ok(selfFigures.outputMs > 0, 'the output device latency is shown');
    const after2 = await cy.evaluate(() => {
      const s = window.tutti.session;
      return { names: s.view.participants.map((p) => p.name).sort(), peers: s.counters().perPeer };
    });
    assert.deepEqual(after2.names, ['Ana', 'Bo'], 'the loopback link is no participant');
    await waitFor(
      'the loopback link removed from the engine',
      async () => {
        const peers = await cy.evaluate(() => window.tutti.session.view.engine.peers);
        return { ok: peers === 2, peers };
      },
      5000,
    );
    assert.deepEqual(logs, [], 'no page errors');
    for (const page of pages) await page.context().close();
  },
);

test(
  'self loopback: the sound check measures its round trip through the engine, and it is the sum of its stages',
  { timeout: 90_000 },
  async () => {
    const context = await toneContext(h.browser, { freq: 440, amplitude: 0.1 });
    const page = await context.newPage();
    const logs = collectLogs(page, 'sound check', [], { errorsOnly: true });
    await page.goto(h.server.url);
    await runSoundCheck(page);
    // The adaptive buffer first covers the stalls of the page's start, and lets go of them some
    // seconds later: measure once its target has held still for 3 s, over the probe's window.
    let last = { t: NaN, since: Date.now() };
    await waitFor(
      'a settled buffer',
      async () => {
        const t = await page.evaluate(
          () => Object.values(window.tutti.session.counters().perPeer)[0].targetMs,
        );
        if (t !== last.t) last = { t, since: Date.now() };
        return { ok: Date.now() - last.since >= 3000, targetMs: t };
      },
      40000,
      250,
    );
    await page.evaluate(() => window.tutti.session.resetLatency());
    assert.equal(await page.evaluate(() => window.tutti.session.startProbe('loopback')), true);
    const result = await tenClicksBack(page);
    assert.ok(result, 'a probe result');
    const f = await figures(page);
    const st = Object.values(f.peers)[0].stages;
    const sum = st.sendQueue.p50 + st.transit.p50;
    console.log(
      `self loopback: ${result.heard}/${result.sent} clicks, round trips ${result.roundTripsMs.map((x) => x.toFixed(2)).join(' ')} ms, median ${result.medianMs.toFixed(2)} ms; ` +
        `send ${st.sendQueue.p50.toFixed(2)} + transit ${st.transit.p50.toFixed(2)} (network ${st.network.p50.toFixed(2)}, delivery ${st.delivery.p50.toFixed(2)}, wait ${st.jitterWait.p50.toFixed(2)}) = ${sum.toFixed(2)} ms; devices ${JSON.stringify(f.devices)}`,
    );
    assert.ok(result.heard >= 8, `clicks heard back: ${result.heard} of ${result.sent}`);
    // No echo side here, but the stages run on the wall clock and the click on the audio clock,
    // and the two are tied only at the callbacks: a callback of n quanta renders n × 2.67 ms of
    // audio in one go while the wall clock moves by the callback period (10 ms for headless
    // Chromium's fake devices, which run 3 or 4 quanta per callback), so the frames between the
    // click's callback and the one that plays it back differ from the wall time between them.
    // And a callback's packets all leave at its start: the transit's mean counts (n − 1) / 2
    // quanta that the click, sent from a callback's first quantum, does not (3.7 ms for 3.75
    // quanta per callback; core/tests/engine_roundtrip.rs). Bound as for the peer: one callback
    // period below the sum. Runs on the fake device read 2.8-3.9 ms below; on the sound server's
    // 128-frame callbacks within 0.1-0.2 ms of the sum (n = 1), up to 1.4 ms above with stalls.
    const callbackMs = f.capture.p99;
    const low = sum - callbackMs - CLICK_TOL_MS;
    assert.ok(
      result.medianMs >= low && result.medianMs <= sum + CLICK_TOL_MS,
      `round trip ${result.medianMs} ms vs stages ${sum} ms: expected ${low}..${sum + CLICK_TOL_MS} (callback ${callbackMs} ms)`,
    );
    assert.deepEqual(logs, []);
    await context.close();
  },
);
