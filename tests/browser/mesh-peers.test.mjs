// The load generator's emulated mesh peers (bench/loadgen's `tutti-mesh-peers`) against a real
// page: the bench that finds how many players one page carries (bench/mesh-page.mjs) is only as
// good as these peers. Three of them join a room of the real server beside one headless Chromium
// page of the built app, each links to the page over the app's mesh protocol (the page offers,
// negotiated audio and control channels, loopback ICE), sends its own tone and answers the
// page's clock pings. Known answers: the page hears each peer's tone at the level of a remote
// player's (its amplitude at the centre pan gain), not its own; every peer receives the page's
// stream; the page's clock pings are answered.
//
// Nothing is built here but the peers' binary: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measureOutputTones } from '../kit/audio.mjs';
import { ROOM_FLAGS, joinRoom, serverAndBrowser, waitFor } from '../kit/harness.mjs';
import { buildMeshPeers, meshPeerTone, startMeshPeers, waitForPeersHeard } from '../kit/mesh-peers.mjs';

const ROOM = 'e2e-mesh-peers';
const PEERS = 3;
const OWN_TONE = 440;
/** The peers' and the page's tones are sent at 0.1 (-20 dBFS); a remote one plays at the centre
 * pan gain (constant power: cos(pi/4)). */
const EXPECTED_DB = 20 * Math.log10(0.1 * Math.SQRT1_2);
const LEVEL_TOL_DB = 1.5;
/** The page's own tone must stay this far below a remote one (a mesh plays no one's own voice). */
const OWN_BELOW_DB = 40;
const SECONDS = 12;

const h = serverAndBrowser(ROOM_FLAGS);

test(
  `${PEERS} emulated mesh peers link to a real page, which hears each one's tone at level`,
  { timeout: 180_000 },
  async () => {
    await buildMeshPeers();
    /** @type {string[]} */
    const logs = [];
    const page = await joinRoom(h, ROOM, { name: 'Listener', tone: OWN_TONE }, logs);
    await waitFor('the page in the room', async () => ({
      ok: await page.evaluate(() => Boolean(window.tutti?.session?.view.access.isOwner)),
    }));
    const peers = startMeshPeers({ port: h.server.port, room: ROOM, peers: PEERS, seconds: SECONDS });
    try {
      await peers.playing;
      await waitForPeersHeard(page, PEERS);
      await new Promise((r) => setTimeout(r, 3000));
      const tones = Array.from({ length: PEERS }, (_, k) => meshPeerTone(k));
      const report = await measureOutputTones(page, 2, [...tones, OWN_TONE]);
      const levels = tones.map((f) => `${f} Hz ${report.tones[f].db.toFixed(1)} dBFS`).join(', ');
      console.log(
        `the page hears: ${levels}; its own ${OWN_TONE} Hz at ${report.tones[OWN_TONE].db.toFixed(1)} dBFS`,
      );
      for (const f of tones) {
        const db = report.tones[f].db;
        assert.ok(
          Math.abs(db - EXPECTED_DB) <= LEVEL_TOL_DB,
          `peer tone ${f} Hz at ${db.toFixed(1)} dBFS, expected ${EXPECTED_DB.toFixed(1)} ± ${LEVEL_TOL_DB}`,
        );
      }
      assert.ok(
        report.tones[OWN_TONE].db < EXPECTED_DB - OWN_BELOW_DB,
        `the page's own tone is in its output`,
      );
      const summary = await peers.done;
      console.log(`the peers: ${JSON.stringify(summary)}`);
      assert.equal(summary.linked, PEERS);
      // Every peer sent and received about one block per 2.67 ms while playing.
      const blocks = (SECONDS * 48000) / 128;
      assert.ok(summary.sent >= 0.98 * PEERS * blocks, `peers sent ${summary.sent} of ${PEERS * blocks}`);
      assert.ok(
        summary.received >= 0.98 * PEERS * blocks,
        `peers received ${summary.received} of the page's ${PEERS * blocks} blocks`,
      );
      assert.ok(summary.pongs >= PEERS, `only ${summary.pongs} clock pings answered`);
    } catch (e) {
      console.log(logs.slice(-20).join('\n'));
      throw e;
    } finally {
      peers.stop();
    }
  },
);
