// Output selection for real: a private PulseAudio server with two outputs (null sinks), the
// default one and "Tutti second output", and headless Chromium playing through it (128-frame
// callbacks). The page picks the second output in the home page's audio setup, as a user would,
// joins a room and hears one emulated player (bench/loadgen's `tutti-mesh-peers`, 375 Hz at
// 0.1). Both outputs are recorded at once from their monitors: the player's tone is on the second
// at a remote player's level (0.1 at the centre pan gain, -23.0 dBFS), and the first holds
// nothing (below -90 dBFS). Then the same with the default output chosen, the other way round,
// so the check cannot pass on an output that is silent anyway.
//
// Nothing is built here but the peers' binary: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { REMOTE_TONE_DB, toneDbMedian } from '../kit/audio.mjs';
import { DIST } from '../kit/browser.mjs';
import { launchChromium } from '../kit/chromium.mjs';
import { ROOM_FLAGS, collectLogs, toneContext } from '../kit/harness.mjs';
import { buildMeshPeers, meshPeerTone, startMeshPeers, waitForPeersHeard } from '../kit/mesh-peers.mjs';
import { startPulse } from '../kit/pulse.mjs';
import { startServer } from '../kit/server.mjs';

const SECOND = 'Tutti second output';
const TOLERANCE_DB = 1.5;
/** An output that plays nothing of the room stays below this. */
const SILENT_DB = -90;
const RECORD_S = 3;
const TONE = meshPeerTone(0);

/** @type {any} */
const h = { server: null, pulse: null, browser: null };
before(async () => {
  h.server = await startServer({ dist: DIST, args: ['--hub-auto', 'false'] });
  h.pulse = await startPulse({ tones: [440], outputs: [SECOND] });
  h.browser = await launchChromium(ROOM_FLAGS, { backend: 'pulse-128', pulse: h.pulse });
});
after(async () => {
  await h.browser?.close().catch(() => {});
  await h.pulse?.stop().catch(() => {});
  await h.server?.stop().catch(() => {});
  setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
});

/**
 * A page that chose `label` as its output on the home page, joined `room` and hears one emulated
 * player: both outputs' level of the player's tone, recorded at once, dBFS (left channel).
 * @param {string} label
 * @param {string} room
 * @param {string[]} logs
 */
async function levelsWith(label, room, logs) {
  const context = await toneContext(h.browser, { freq: 440, amplitude: 0.1 });
  const page = await context.newPage();
  collectLogs(page, label, logs, { errorsOnly: true });
  try {
    await page.goto(h.server.url);
    const allow = page.getByRole('button', { name: 'Allow microphone to list devices' });
    // The page may list the devices by itself a moment after showing the button (the grant is
    // there already): a button gone by the click is not a failure (once it waited 30 s for it).
    if (await allow.isVisible()) await allow.click({ timeout: 5000 }).catch(() => {});
    const select = page.getByTestId('output-device');
    const listed = await select.locator('option').allTextContents();
    console.log(`the outputs the page lists: ${JSON.stringify(listed)}`);
    if (label === '') await select.selectOption('');
    else await select.selectOption({ label });
    const chosen = await select.inputValue();
    await page.goto(`${h.server.url}r/${room}?ice=loopback`);
    await page.getByTestId('display-name').fill('Listener');
    await page.getByTestId('join').click();
    const peers = startMeshPeers({ port: h.server.port, room, peers: 1, seconds: 30 });
    try {
      await peers.playing;
      await waitForPeersHeard(page, 1);
      await new Promise((r) => setTimeout(r, 1500));
      const sinkId = await page.evaluate(
        () => /** @type {any} */ (window.tutti.session).link.ctx?.sinkId ?? null,
      );
      const records = await Promise.all(h.pulse.outputs.map((o) => h.pulse.record(o.name, RECORD_S)));
      const levels = records.map((r) => toneDbMedian(r.left.subarray(r.rate / 2), TONE, r.rate));
      return { chosen, sinkId, levels };
    } finally {
      peers.stop();
      await peers.done.catch(() => {});
    }
  } finally {
    await context.close();
  }
}

test(
  "the output chosen in the audio setup plays the room's audio, and the other output nothing",
  { timeout: 180_000 },
  async () => {
    await buildMeshPeers();
    assert.deepEqual(
      h.pulse.outputs.map((o) => o.label),
      ['Tutti null output', SECOND],
    );
    /** @type {string[]} */
    const logs = [];
    /** @type {[string, string, number][]} The output chosen ('': the default), the room, the output that plays. */
    const cases = [
      [SECOND, 'e2e-output-second', 1],
      ['', 'e2e-output-default', 0],
    ];
    for (const [label, room, on] of cases) {
      const r = await levelsWith(label, room, logs);
      const said = h.pulse.outputs.map((o, i) => `${o.label} ${r.levels[i].toFixed(1)} dBFS`).join(', ');
      console.log(
        `chose "${label || 'Default output'}" (${r.chosen || 'default'}, sinkId "${r.sinkId}"): ${said}`,
      );
      assert.equal(r.sinkId, r.chosen, 'the audio context plays to the chosen device');
      r.levels.forEach((db, i) => {
        if (i === on)
          assert.ok(
            Math.abs(db - REMOTE_TONE_DB) <= TOLERANCE_DB,
            `${h.pulse.outputs[i].label}: ${db.toFixed(1)} dBFS, expected ${REMOTE_TONE_DB.toFixed(1)} ± ${TOLERANCE_DB}`,
          );
        else
          assert.ok(db < SILENT_DB, `${h.pulse.outputs[i].label} plays the room too: ${db.toFixed(1)} dBFS`);
      });
    }
    assert.deepEqual(logs, [], 'no page errors');
  },
);
