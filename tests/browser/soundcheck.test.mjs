// The sound check (home page): the user's input through the whole engine and back, with no
// server and no network: a 440 Hz tone as the microphone must come out at 440 Hz, at the level a
// remote peer at centre pan has, with a jitter buffer that holds it and no underrun.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertToneBack, measureOutputTones } from '../kit/audio.mjs';
import { collectLogs, MEDIA_FLAGS, runSoundCheck, serverAndBrowser, toneContext } from '../kit/harness.mjs';

const TONE = 440;
const AMPLITUDE = 0.1;
/** A peer at centre pan: AMPLITUDE × cos(π/4). */
const EXPECTED_DB = 20 * Math.log10(AMPLITUDE * Math.SQRT1_2);
const LEVEL_TOL_DB = 1;
const h = serverAndBrowser(MEDIA_FLAGS);

test('sound check: a 440 Hz input comes back through the engine at 440 Hz and at level', async () => {
  const context = await toneContext(h.browser, { freq: TONE, amplitude: AMPLITUDE });
  const page = await context.newPage();
  const logs = collectLogs(page, 'sound check', [], { errorsOnly: true });
  await page.goto(h.server.url);
  const state = await runSoundCheck(page);
  // Let the adaptive buffer settle, then listen.
  await page.waitForTimeout(2000);
  const report = await measureOutputTones(page, 2, [TONE, 330, 550, 880]);
  const figures = await page.evaluate(() => {
    const s = window.tutti.session;
    return { counters: s.counters(), view: s.view.participants[0] };
  });
  const peer = Object.values(figures.counters.perPeer)[0];
  const depth = Object.fromEntries(
    ['bufferedMs', 'targetMs', 'jitterMs', 'oracleMs', 'underruns', 'stallUnderruns', 'lateUnderruns'].map(
      (k) => [k, +peer[k].toFixed(2)],
    ),
  );
  console.log(
    `sound check: ${JSON.stringify({ state, depth, tones: Object.fromEntries(Object.entries(report.tones).map(([f, t]) => [f, +t.db.toFixed(2)])), bufferMs: figures.view.bufferMs, format: figures.view.format })}`,
  );
  assertToneBack(report, TONE, [330, 550, 880], EXPECTED_DB, LEVEL_TOL_DB);
  assert.ok(figures.view.bufferMs > 0 && figures.view.bufferMs < 100, `buffer ${figures.view.bufferMs} ms`);
  assert.ok(peer.received > 300, `packets through the loop: ${peer.received}`);
  assert.equal(peer.lost, 0, 'a loopback loses nothing');
  // Stopping releases the audio.
  await page.getByTestId('soundcheck-toggle').click();
  await page.waitForFunction(() => window.tutti.session.view.signaling === 'closed');
  assert.deepEqual(logs, []);
  await context.close();
});

test('sound check through the server: the hub echoes the 440 Hz input, at level, and the round trip shows', async () => {
  const context = await toneContext(h.browser, { freq: TONE, amplitude: AMPLITUDE });
  const page = await context.newPage();
  const logs = collectLogs(page, 'sound check via the server', [], { errorsOnly: true });
  await page.goto(h.server.url);
  await page.getByTestId('soundcheck-via-server').check();
  const state = await runSoundCheck(page);
  await page.waitForTimeout(2000);
  const report = await measureOutputTones(page, 2, [TONE, 330, 550, 880]);
  const figures = await page.evaluate(() => {
    const s = window.tutti.session;
    return {
      counters: s.counters(),
      view: s.view.participants[0],
      topology: s.view.topology,
      rttText: document.querySelector('[data-testid="soundcheck-server-rtt"]')?.textContent ?? null,
    };
  });
  const peer = Object.values(figures.counters.perPeer)[0];
  console.log(
    `sound check via the server: ${JSON.stringify({ state, name: figures.view.name, rttMs: figures.view.rttMs, rttText: figures.rttText, topology: figures.topology.mode, hub: figures.topology.hub, received: peer.received, lost: peer.lost, bufferMs: +peer.bufferedMs.toFixed(1), tones: Object.fromEntries(Object.entries(report.tones).map(([f, t]) => [f, +t.db.toFixed(2)])) })}`,
  );
  // Through the hub, not the engine's own loop: the room is on the hub and the packets came back
  // on the hub link, with the server's round trip measured on it.
  assert.equal(figures.topology.mode, 'forward');
  assert.equal(figures.topology.hub, 'connected');
  assert.equal(figures.view.name, 'You, through the server');
  const links = h.server.logs.filter((l) =>
    /hub link room=sound-check-[0-9a-f]+ .*mode=forward echo/.test(l),
  );
  assert.equal(links.length, 1, `the server's echo link: ${JSON.stringify(h.server.logs.slice(-20))}`);
  assert.ok(
    figures.view.rttMs !== null && figures.view.rttMs >= 0 && figures.view.rttMs < 50,
    `round trip to the server ${figures.view.rttMs} ms (loopback)`,
  );
  assert.match(figures.rttText ?? '', /^\d+\.\d ms$/);
  assertToneBack(report, TONE, [330, 550, 880], EXPECTED_DB, LEVEL_TOL_DB);
  assert.ok(peer.received > 300, `packets back through the server: ${peer.received}`);
  // Stopping leaves the private room: the server forgets it.
  await page.getByTestId('soundcheck-toggle').click();
  await page.waitForFunction(() => window.tutti.session.view.signaling === 'closed');
  assert.deepEqual(logs, []);
  await context.close();
});
