// Clock offset and RTT per peer, end to end: three pages in a room on loopback, each with the
// real pump (in its net worker) pinging its two peers over the control data channel. All pages
// share this machine's clock, so the known answer for every offset is 0; the RTT of a loopback
// path is a fraction of a millisecond. The packets' header timestamps are the senders' wall
// clock at sending, so at the receiver they lag its own wall clock by the one-way delay only.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { joinRoom, ROOM_FLAGS, serverAndBrowser, waitFor, waitForRoomOf } from '../kit/harness.mjs';

const ROOM = 'e2e-clock';
const PLAYERS = [
  { name: 'Ana', tone: 330 },
  { name: 'Bo', tone: 550 },
  { name: 'Cy', tone: 770 },
];
/** One machine, one clock: every offset estimate must be 0 within this, µs. */
const OFFSET_TOL_US = 500;
/** A loopback RTT is well under a millisecond; a busy 2-core machine may stretch it. */
const RTT_MAX_MS = 20;
/** Arrival − header timestamp at the receiver: the one-way delay, never near this, ms. */
const STAMP_TOL_MS = 50;
const h = serverAndBrowser(ROOM_FLAGS);

function join(p, logs) {
  return joinRoom(h, ROOM, p, logs);
}

test(
  'every page knows each peer clock offset (0 on one machine) and RTT, and packets carry the send time',
  { timeout: 120_000 },
  async () => {
    const logs = [];
    const pages = [];
    for (const p of PLAYERS) pages.push(await join(p, logs));
    await waitForRoomOf(pages);
    await pages[0].waitForTimeout(5000);

    const figures = await Promise.all(
      pages.map((page) =>
        page.evaluate(() => {
          const s = window.tutti.session;
          const c = s.counters();
          return {
            pump: s.pumpThread,
            peers: s.view.participants.map((p) => ({
              name: p.name,
              viewRttMs: p.rttMs,
              ...c.perPeer[p.peer],
            })),
          };
        }),
      ),
    );
    for (const [i, f] of figures.entries()) {
      console.log(
        `${PLAYERS[i].name} (pump in ${f.pump}): ${f.peers
          .map(
            (p) =>
              `${p.name} offset ${p.offsetUs?.toFixed(1)} µs, RTT ${p.rttMs?.toFixed(3)} ms over ${p.clockExchanges} exchanges, ` +
              `stamp lag ${p.stampLagMs?.toFixed(3)} ms, send queue ${p.sendQueueMs?.toFixed(3)} ms`,
          )
          .join('; ')}`,
      );
    }
    for (const [i, f] of figures.entries()) {
      const who = PLAYERS[i].name;
      assert.equal(f.peers.length, 2, `${who} sees two peers`);
      for (const p of f.peers) {
        const at = `${who} → ${p.name}`;
        // A figure the page does not have yet reads as NaN, which fails every bound.
        assert.ok((p.clockExchanges ?? NaN) >= 3, `${at}: ${p.clockExchanges} clock exchanges`);
        assert.ok(
          Math.abs(p.offsetUs ?? NaN) <= OFFSET_TOL_US,
          `${at}: offset ${p.offsetUs} µs, expected 0 ± ${OFFSET_TOL_US}`,
        );
        assert.ok((p.rttMs ?? NaN) > 0 && (p.rttMs ?? NaN) < RTT_MAX_MS, `${at}: RTT ${p.rttMs} ms`);
        assert.ok(
          Math.abs(p.stampLagMs ?? NaN) < STAMP_TOL_MS,
          `${at}: a packet's header timestamp is ${p.stampLagMs} ms behind the receiver's wall clock`,
        );
        assert.ok(
          (p.sendQueueMs ?? NaN) >= 0 && (p.sendQueueMs ?? NaN) < 1000,
          `${at}: send queue ${p.sendQueueMs} ms`,
        );
      }
    }
    // The view refreshes its figures twice a second and the pump's median RTT may move in
    // between: the view shows the pump's RTT when, read together, they agree at one refresh.
    await waitFor(
      "every view shows its pump's RTT",
      async () => {
        const pairs = await Promise.all(
          pages.map((page) =>
            page.evaluate(() => {
              const s = window.tutti.session;
              const c = s.counters();
              return s.view.participants.map((p) => [p.rttMs, c.perPeer[p.peer].rttMs]);
            }),
          ),
        );
        return { ok: pairs.flat().every(([view, pump]) => Math.abs(view - pump) <= 0.5), pairs };
      },
      10_000,
      100,
    );
    assert.deepEqual(logs, [], 'no page errors');
    for (const page of pages) await page.context().close();
  },
);
