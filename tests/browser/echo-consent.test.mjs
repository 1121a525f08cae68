// A round trip needs the asked player's consent, and its echo goes to the asker only: three pages
// (real server, real data channels, the real engine in its worklet), each with a tone of its own
// as the microphone. Alex asks Bea for a round trip:
//
// 1. nothing is echoed while Bea's page asks her: what Bea sends Alex is still Bea's tone;
// 2. Bea allows it: Alex hears his own tone back from Bea, and Cy still hears Bea's tone (and not
//    Alex's through Bea);
// 3. Bea presses Stop: Alex hears Bea's tone again; asking again at once is dropped and counted;
// 4. after the cooldown Alex measures the round trip from the stats view, Bea denies, and Alex's
//    probe ends with "Bea declined the round-trip measurement." instead of waiting;
// 5. Bea allows requests without asking for the session: Alex's next request runs unasked, and
//    Bea muting Alex in her mix stops it.
//
// What each page receives from Bea is read in its output: Alex mutes Cy and Cy mutes Alex in
// their mixes, so each output holds Bea's stream alone; each tone's level is a least-squares fit
// at its frequency (lib/audio.mjs), judged as in room.test.mjs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measureOutputTones } from '../kit/audio.mjs';
import { joinRoom, ROOM_FLAGS, serverAndBrowser, waitFor, waitForRoomOf } from '../kit/harness.mjs';

const ROOM = 'e2e-echo-consent';
const ALEX = { name: 'Alex', tone: 330 };
const BEA = { name: 'Bea', tone: 550 };
const CY = { name: 'Cy', tone: 770 };
/** Frequencies between and above the tones, 110 Hz or more from each (the 100 ms fit's leakage
 * 55 Hz from a tone is about -54 dB re the tone): the output's floor there (noise, artifacts). */
const BETWEEN = [440, 660, 880, 990];
const TONES = [ALEX.tone, BEA.tone, CY.tone, ...BETWEEN];
/** A remote tone arrives at the microphone's amplitude (0.1) × the centre pan gain. */
const EXPECTED_DB = 20 * Math.log10(0.1 * Math.SQRT1_2);
const LEVEL_TOL_DB = 1.5;
/** A tone that should not be there: this far below EXPECTED_DB, or at most this far over the floor. */
const ABSENT_BELOW_DB = 40;
const ABSENT_OVER_FLOOR_DB = 6;
/** Seconds of output per measurement: a whole number of 128-frame quanta (the tap writes whole
 * quanta, and a capture of any other length waits for its deadline). */
const CAPTURE_S = 1.6;
/** The echo Alex asks for, ms (the longest one request may ask). */
const ECHO_MS = 10_000;
/** After a stop the asker's requests are dropped for this long (app/src/net/echo-consent.ts). */
const COOLDOWN_MS = 10_000;

const h = serverAndBrowser(ROOM_FLAGS);

/** `page`'s output over CAPTURE_S: each tone's level, and the floor between them (dBFS). */
async function hear(page) {
  const r = await measureOutputTones(page, CAPTURE_S, TONES);
  const db = (f) => r.tones[f].db;
  return { alex: db(ALEX.tone), bea: db(BEA.tone), cy: db(CY.tone), floor: Math.max(...BETWEEN.map(db)) };
}

const fmt = (x) =>
  `${x.alex.toFixed(1)} / ${x.bea.toFixed(1)} / ${x.cy.toFixed(1)} dBFS (floor ${x.floor.toFixed(1)})`;

/** Waits (5 s at most) until `asker`'s last echo request to the peer `id` has the answer `want`. */
function replyIs(label, asker, id, want) {
  return waitFor(
    label,
    async () => {
      const reply = await asker.evaluate((id) => window.tutti.session.echoReply(id), id);
      return { ok: reply === want, reply };
    },
    5000,
  );
}

function present(label, level, x) {
  assert.ok(
    Math.abs(level - EXPECTED_DB) <= LEVEL_TOL_DB,
    `${label}: at ${level.toFixed(1)} dBFS, expected ${EXPECTED_DB.toFixed(1)} ± ${LEVEL_TOL_DB} (Alex / Bea / Cy ${fmt(x)})`,
  );
}

function absent(label, level, x) {
  assert.ok(
    level < EXPECTED_DB - ABSENT_BELOW_DB || level <= x.floor + ABSENT_OVER_FLOOR_DB,
    `${label}: at ${level.toFixed(1)} dBFS, should be absent (Alex / Bea / Cy ${fmt(x)})`,
  );
}

test(
  'an echo waits for consent, reaches only the asker, stops on Stop or mute, and a denial ends the probe',
  { timeout: 180_000 },
  async () => {
    const logs = [];
    const alex = await joinRoom(h, ROOM, ALEX, logs);
    const bea = await joinRoom(h, ROOM, BEA, logs);
    const cy = await joinRoom(h, ROOM, CY, logs);
    const pages = [alex, bea, cy];
    await waitForRoomOf(pages);
    const ids = Object.fromEntries(
      await alex.evaluate(() => [
        [window.tutti.session.view.self.name, window.tutti.session.view.self.peer],
        ...window.tutti.session.view.participants.map((p) => [p.name, p.peer]),
      ]),
    );
    // Each output holds Bea's stream alone.
    await alex.locator('[data-testid="strip"][data-name="Cy"] [data-testid="strip-mute"]').click();
    await cy.locator('[data-testid="strip"][data-name="Alex"] [data-testid="strip-mute"]').click();

    // (Both pages' first capture also loads their tap worklet, so that the ones during the echo are quick.)
    const [before, cyBefore] = await Promise.all([hear(alex), hear(cy)]);
    console.log(`before: Alex hears (Alex / Bea / Cy) ${fmt(before)}; Cy hears ${fmt(cyBefore)}`);
    present('Bea at Alex before', before.bea, before);
    absent('Alex at Alex before', before.alex, before);
    absent('Cy at Alex (muted)', before.cy, before);
    present('Bea at Cy before', cyBefore.bea, cyBefore);
    absent('Alex at Cy (muted)', cyBefore.alex, cyBefore);

    // 1. Alex asks; Bea's page says who asks and what it does; nothing is echoed meanwhile.
    assert.equal(
      await alex.evaluate(([bea, ms]) => window.tutti.session.requestEcho(bea, ms), [ids.Bea, ECHO_MS]),
      true,
    );
    const prompt = bea.locator(`[data-testid="echo-request"][data-peer="${ids.Alex}"]`);
    await prompt.waitFor({ timeout: 10_000 });
    const text = (await prompt.getByTestId('echo-request-text').innerText()).replace(/\s+/g, ' ').trim();
    console.log(`Bea's page: "${text}"`);
    assert.equal(
      text,
      "Alex asks to measure the round trip to you: for up to 10 s your sound to Alex is Alex's own sound, sent back. Others keep hearing you.",
    );
    const pending = await hear(alex);
    console.log(`Alex hears while Bea is asked: ${fmt(pending)}`);
    present('Bea at Alex while asked', pending.bea, pending);
    absent('Alex at Alex while asked (nothing echoed unasked)', pending.alex, pending);
    assert.equal(await bea.evaluate(() => window.tutti.session.echoing()), null, 'Bea echoes nobody unasked');

    // 2. Bea allows it: Alex hears himself from Bea, Cy still hears Bea.
    await prompt.getByTestId('echo-allow').click();
    await bea.getByTestId('echo-notice').waitFor({ timeout: 5000 });
    const allowedAt = Date.now();
    assert.equal(await bea.evaluate(() => window.tutti.session.echoing()), ids.Alex);
    await replyIs('Alex told it is allowed', alex, ids.Bea, 'allowed');
    await new Promise((r) => setTimeout(r, 300));
    const startS = (Date.now() - allowedAt) / 1000;
    const [atAlex, atCy] = await Promise.all([hear(alex), hear(cy)]);
    const echoSeconds = (Date.now() - allowedAt) / 1000;
    console.log(
      `during the echo (measured ${startS.toFixed(1)}-${echoSeconds.toFixed(1)} s after Allow): Alex hears ${fmt(atAlex)}; Cy hears ${fmt(atCy)}`,
    );
    assert.ok(echoSeconds < ECHO_MS / 1000, 'measured while the echo ran');
    present('Alex at Alex (his own tone back from Bea)', atAlex.alex, atAlex);
    absent('Bea at Alex during the echo', atAlex.bea, atAlex);
    present('Bea at Cy during the echo', atCy.bea, atCy);
    absent('Alex at Cy through Bea during the echo', atCy.alex, atCy);

    // 3. Bea stops it: Bea's tone again for Alex; a request right away is dropped and counted.
    await bea.getByTestId('echo-stop').click();
    const stoppedAt = Date.now();
    await waitFor(
      'the echo stopped',
      async () => ({
        ok:
          (await bea.evaluate(() => window.tutti.session.echoing())) === null &&
          (await bea.getByTestId('echo-notice').count()) === 0,
      }),
      5000,
    );
    await replyIs('Alex told it stopped', alex, ids.Bea, 'stopped');
    await new Promise((r) => setTimeout(r, 300));
    const after = await hear(alex);
    console.log(
      `Alex hears after Stop (measured by ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s): ${fmt(after)}`,
    );
    present('Bea at Alex after Stop', after.bea, after);
    absent('Alex at Alex after Stop', after.alex, after);
    await alex.evaluate(([bea, ms]) => window.tutti.session.requestEcho(bea, ms), [ids.Bea, ECHO_MS]);
    const dropped = await waitFor(
      'the repeated request dropped and counted',
      async () => {
        const n = await bea.evaluate(
          (alex) => window.tutti.session.counters().perPeer[alex]?.echoRequestsDropped,
          ids.Alex,
        );
        return { ok: n === 1, n };
      },
      5000,
    );
    assert.equal(
      await bea.getByTestId('echo-request').count(),
      0,
      'no prompt for a request inside the cooldown',
    );
    console.log(
      `a request ${((Date.now() - stoppedAt) / 1000).toFixed(1)} s after Stop: no prompt, dropped ${dropped.n}`,
    );

    // 4. After the cooldown, Alex measures the round trip; Bea denies; Alex's probe says so.
    await new Promise((r) => setTimeout(r, Math.max(0, stoppedAt + COOLDOWN_MS + 500 - Date.now())));
    await alex.getByTestId('stats-toggle').click();
    await alex.getByRole('button', { name: 'Measure round trip to Bea' }).click();
    const again = bea.locator(`[data-testid="echo-request"][data-peer="${ids.Alex}"]`);
    await again.waitFor({ timeout: 10_000 });
    assert.match(await again.innerText(), /for up to 8 s/);
    assert.equal((await alex.evaluate(() => window.tutti.session.probeResult()))?.state, 'asking');
    const deniedAt = Date.now();
    await again.getByTestId('echo-deny').click();
    const result = alex.locator(
      `[data-testid="stage-table"][data-peer="${ids.Bea}"] [data-testid="probe-result"]`,
    );
    await result.waitFor({ timeout: 5000 });
    const message = (await result.innerText()).trim();
    console.log(`Alex's probe, ${Date.now() - deniedAt} ms after Deny: "${message}"`);
    assert.equal(message, 'Bea declined the round-trip measurement.');
    assert.equal(await result.getAttribute('data-refused'), 'true');
    const r = await alex.evaluate(() => window.tutti.session.probeResult());
    assert.ok(r, 'a probe result');
    assert.deepEqual([r.state, r.sent], ['refused', 0]);
    assert.equal(await bea.evaluate(() => window.tutti.session.echoing()), null, 'no echo after a denial');

    // 5. Bea allows requests without asking for the session: after the cooldown Alex's next one
    // runs unasked; muting Alex in her mix stops it.
    await bea.getByTestId('echo-auto').check();
    await new Promise((r) => setTimeout(r, Math.max(0, deniedAt + COOLDOWN_MS + 500 - Date.now())));
    await alex.evaluate(([bea, ms]) => window.tutti.session.requestEcho(bea, ms), [ids.Bea, ECHO_MS]);
    await bea.getByTestId('echo-notice').waitFor({ timeout: 5000 });
    assert.equal(await bea.getByTestId('echo-request').count(), 0, 'not asked');
    assert.equal(await bea.evaluate(() => window.tutti.session.echoing()), ids.Alex);
    await bea.locator('[data-testid="strip"][data-name="Alex"] [data-testid="strip-mute"]').click();
    const muted = await waitFor(
      'the echo stopped by muting Alex',
      async () => {
        const echoing = await bea.evaluate(() => window.tutti.session.echoing());
        const reply = await alex.evaluate((bea) => window.tutti.session.echoReply(bea), ids.Bea);
        return { ok: echoing === null && reply === 'stopped', echoing, reply };
      },
      5000,
    );
    console.log(`allowed without asking, then Bea muted Alex: ${JSON.stringify(muted)}`);
    assert.deepEqual(logs, [], 'no page errors');
    for (const page of pages) await page.context().close();
  },
);
