// Who gets into a room, in headless Chromium against the real server and the built app:
// 1. a room created from the home page has an unguessable name (two words and 13 base-32
//    characters), two creations differ, and "Private room" is on: the page lands on
//    /r/<room>#k=<key> and becomes the room's owner;
// 2. the private room's key reaches the server only inside `join` (no request URL or header,
//    no other WebSocket frame, no server log line carries it); the same link without the key
//    lands in a different, empty room of the same name; with the key, in the owner's room; the
//    link reloaded keeps its key, and the owner secret kept in localStorage makes the reloaded
//    page the owner again;
// 3. a wrong password says "Wrong password" and takes the right one; a password given to an open
//    room says the room has none, and "Join without a password" joins;
// 4. the owner locks the room: every member sees it locked, and a new joiner reads that the room
//    is locked;
// 5. the owner removes a member: the member reads that they were removed, the others see them
//    leave, and the member's page does not join again by itself.
//
// Nothing is built here: `npm test` builds dist/ and the server first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { collectLogs, ROOM_FLAGS, serverAndBrowser, toneContext, waitFor } from '../kit/harness.mjs';

/** What the app generates (app/src/ui/names.ts). */
const GENERATED = /^[a-z]+-[a-z]+-[0-9a-hjkmnp-tv-z]{13}$/;
const KEY = /^[A-Za-z0-9_-]{22}$/;

// The server keeps its rooms in a temporary directory of its own (tests/kit/server.mjs).
const h = serverAndBrowser(ROOM_FLAGS);
/** What one test leaves for the next: the owner's page, the friend's, the room and its key. */
const shared = /** @type {any} */ ({});
/** Every page opened, for its logs. */
const pages = [];

/**
 * A fresh browser context (its own storage) whose microphone is a tone, with every request URL
 * and header and every WebSocket frame the page sends recorded.
 */
async function openPage(label, freq = 440) {
  const context = await toneContext(h.browser, { freq, amplitude: 0.1 });
  const page = await context.newPage();
  const entry = {
    label,
    page,
    logs: collectLogs(page, label, [], { errorsOnly: true }),
    requests: /** @type {string[]} */ ([]),
    frames: /** @type {string[]} */ ([]),
  };
  page.on('request', (r) => entry.requests.push(`${r.url()} ${JSON.stringify(r.headers())}`));
  page.on('websocket', (ws) => ws.on('framesent', (f) => entry.frames.push(String(f.payload))));
  pages.push(entry);
  return entry;
}

async function closePage(entry) {
  await entry.page
    .context()
    .close()
    .catch(() => {});
}

/** The session's view as the page has it (window.tutti, set by the session for diagnostics). */
function view(page) {
  return page.evaluate(() => {
    const v = window.tutti?.session?.view;
    if (!v) return null;
    return {
      room: v.room,
      key: v.key,
      joined: v.joined,
      signaling: v.signaling,
      error: v.error,
      access: v.access,
      participants: v.participants.map((p) => ({ peer: p.peer, name: p.name })),
      self: v.self.peer,
    };
  });
}

/** Waits until the page's view satisfies `ok`; returns that view. */
async function until(what, page, ok, timeoutMs = 20000) {
  const r = await waitFor(
    what,
    async () => {
      const v = await view(page);
      return { ok: !!v && ok(v), v };
    },
    timeoutMs,
  );
  return r.v;
}

const joined = (v) => v.joined && v.signaling === 'open';

/** Opens `path` (with `?ice=loopback` before any fragment) and joins from the join card. */
async function joinByLink(entry, path, name, password = '') {
  const cut = path.indexOf('#');
  const url = cut < 0 ? `${path}?ice=loopback` : `${path.slice(0, cut)}?ice=loopback${path.slice(cut)}`;
  await entry.page.goto(`${h.server.url}${url.replace(/^\//, '')}`);
  await entry.page.getByTestId('display-name').fill(name);
  if (password) await entry.page.getByTestId('password').fill(password);
  await entry.page.getByTestId('join').click();
}

/** The room error the page shows: its code and text. */
async function roomError(page) {
  const err = page.getByTestId('room-error');
  await err.waitFor({ timeout: 20000 });
  return { code: await err.getAttribute('data-code'), text: await err.textContent() };
}

test(
  'a room created from the home page is unguessable, private and owned',
  { timeout: 120_000 },
  async () => {
    const owner = await openPage('Owner', 330);
    await owner.page.goto(`${h.server.url}?ice=loopback`);
    await owner.page.getByTestId('display-name').fill('Olga');
    await owner.page.getByTestId('create').click();
    const first = await owner.page.getByTestId('room-name').inputValue();
    await owner.page.getByTestId('create').click();
    const room = await owner.page.getByTestId('room-name').inputValue();
    console.log(`generated room names: ${first}, ${room}`);
    assert.match(first, GENERATED);
    assert.match(room, GENERATED);
    assert.notEqual(first, room);
    assert.equal(
      await owner.page.getByTestId('private-room').isChecked(),
      true,
      'a new room is private by default',
    );
    await owner.page.getByTestId('join').click();

    const v = await until('the owner joined', owner.page, joined);
    const url = new URL(owner.page.url());
    assert.equal(url.pathname, `/r/${room}`);
    const key = new URLSearchParams(url.hash.slice(1)).get('k');
    assert.match(key ?? '', KEY, `the link's fragment holds the key: ${url.hash}`);
    assert.equal(v.key, key);
    assert.deepEqual(v.access, { isOwner: true, locked: false, protected: false, private: true });
    assert.equal(
      await owner.page.getByTestId('share-link').textContent(),
      `${h.server.url}r/${room}#k=${key}`,
    );
    assert.equal(await owner.page.getByTestId('room-protected').getAttribute('data-protected'), 'false');
    Object.assign(shared, { owner, room, key });
  },
);

test(
  'the private key reaches the server only in join; without it the link is another room',
  { timeout: 180_000 },
  async () => {
    const { owner, room, key } = shared;
    assert.ok(owner, 'the first test made the room');

    // The same name without the key: another room, empty, whose first joiner owns it.
    const guesser = await openPage('Guesser', 550);
    await joinByLink(guesser, `/r/${room}`, 'Gus');
    const g = await until('the guesser joined', guesser.page, joined);
    assert.equal(g.key, null);
    assert.deepEqual(g.participants, [], 'the guesser is alone');
    assert.equal(g.access.isOwner, true, 'the guesser made the open room of that name');
    assert.deepEqual((await view(owner.page)).participants, [], 'the owner sees nobody new');

    // With the key: the owner's room.
    const friend = await openPage('Friend', 440);
    await joinByLink(friend, `/r/${room}#k=${key}`, 'Fay');
    const f = await until(
      'the friend joined the owner',
      friend.page,
      (v) => joined(v) && v.participants.length === 1,
    );
    assert.deepEqual(
      f.participants.map((p) => p.name),
      ['Olga'],
    );
    assert.equal(f.access.isOwner, false);
    await until('the owner sees the friend', owner.page, (v) => v.participants.some((p) => p.name === 'Fay'));
    assert.deepEqual((await view(guesser.page)).participants, [], 'the guesser still sees nobody');

    // The link reloaded: same key, same room, and the owner is the owner again (its secret kept).
    await owner.page.reload();
    await owner.page.getByTestId('join-private').waitFor({ timeout: 15000 });
    await owner.page.getByTestId('join').click();
    const o = await until(
      'the owner back after a reload',
      owner.page,
      (v) => joined(v) && v.participants.some((p) => p.name === 'Fay'),
    );
    assert.equal(o.key, key);
    assert.equal(
      o.access.isOwner,
      true,
      'the owner secret from localStorage made the reloaded page the owner',
    );
    assert.equal(new URL(owner.page.url()).hash, `#k=${key}`);

    // Where the key went: join frames only, from the pages that have the link.
    for (const e of [owner, friend, guesser]) {
      const leaks = e.requests.filter((r) => r.includes(key));
      assert.deepEqual(leaks, [], `${e.label}: no request URL or header carries the key`);
      const carrying = e.frames.filter((f) => f.includes(key));
      assert.ok(
        carrying.every((f) => JSON.parse(f).type === 'join'),
        `${e.label}: only join frames carry the key: ${carrying.join(' | ')}`,
      );
      if (e !== guesser) assert.ok(carrying.length >= 1, `${e.label} sent the key in its join`);
      else assert.equal(carrying.length, 0);
    }
    const logged = h.server.logs.filter((l) => l.includes(key));
    assert.deepEqual(logged, [], 'no server log line holds the key');
    // The logs do tell of the room (so the check above read the right lines), as private.
    const named = h.server.logs.filter((l) => l.includes(room));
    assert.ok(
      named.some((l) => /private/.test(l)),
      `the server logs the room as private: ${named.join(' | ')}`,
    );
    console.log(`server log lines naming the room: ${named.length}, e.g. ${named[0]}`);
    console.log(
      `key frames: owner ${owner.frames.filter((f) => f.includes(key)).length} (joins), friend ` +
        `${friend.frames.filter((f) => f.includes(key)).length}; requests checked: ${owner.requests.length + friend.requests.length + guesser.requests.length}`,
    );
    await closePage(guesser);
    shared.friend = friend;
  },
);

test(
  'a wrong password and a password to an open room each say what happened',
  { timeout: 180_000 },
  async () => {
    const room = `pw-${Date.now().toString(36)}`;
    const keeper = await openPage('Keeper', 220);
    await joinByLink(keeper, `/r/${room}`, 'Kim', 'open sesame');
    const k = await until('the keeper joined', keeper.page, joined);
    assert.equal(k.access.protected, true);
    assert.equal(await keeper.page.getByTestId('room-protected').getAttribute('data-protected'), 'true');

    const wrong = await openPage('Wrong', 660);
    await joinByLink(wrong, `/r/${room}`, 'Walt', 'open says me');
    let err = await roomError(wrong.page);
    assert.equal(err.code, 'wrong-password');
    assert.match(err.text, /Wrong password/);
    await wrong.page.getByTestId('password').fill('open sesame');
    await wrong.page.getByTestId('retry-password').click();
    const w = await until(
      'the right password let Walt in',
      wrong.page,
      (v) => joined(v) && v.participants.length === 1,
    );
    assert.equal(w.access.protected, true);
    await closePage(wrong);
    await closePage(keeper);

    // A password to a room without one: refused, said so, and joined without it on request.
    const open = `open-${Date.now().toString(36)}`;
    const host = await openPage('Host', 220);
    await joinByLink(host, `/r/${open}`, 'Hal');
    await until('the host joined', host.page, joined);
    const careful = await openPage('Careful', 660);
    await joinByLink(careful, `/r/${open}`, 'Cleo', 'secret');
    err = await roomError(careful.page);
    assert.equal(err.code, 'no-password');
    assert.match(
      err.text,
      /This room has no password: anyone with the link can join\. Join without a password\?/,
    );
    assert.equal((await view(careful.page)).joined, false, 'the join was refused, not silently let through');
    await careful.page.getByTestId('join-without-password').click();
    const c = await until(
      'Cleo joined without the password',
      careful.page,
      (v) => joined(v) && v.participants.length === 1,
    );
    assert.equal(c.access.protected, false);
    assert.equal(await careful.page.getByTestId('room-protected').getAttribute('data-protected'), 'false');
    await closePage(careful);
    await closePage(host);
  },
);

test('the owner locks the room and removes a member', { timeout: 180_000 }, async () => {
  const { owner, friend, room, key } = shared;
  assert.ok(owner && friend, 'the first tests made the room');

  await owner.page.getByTestId('lock-room').click();
  await waitFor(
    'the lock shows',
    async () => ({
      ok: (await owner.page.getByTestId('lock-room').getAttribute('aria-pressed')) === 'true',
    }),
    15000,
  );
  await until('the friend sees the lock', friend.page, (v) => v.access.locked === true);
  await friend.page.getByTestId('room-locked-badge').waitFor({ timeout: 5000 });
  assert.equal(await friend.page.getByTestId('lock-room').count(), 0, 'only the owner has the lock');

  const late = await openPage('Late', 550);
  await joinByLink(late, `/r/${room}#k=${key}`, 'Lou');
  const err = await roomError(late.page);
  assert.equal(err.code, 'room-locked');
  assert.match(err.text, /This room is locked/);
  assert.deepEqual(
    (await view(owner.page)).participants.map((p) => p.name),
    ['Fay'],
    'nobody new got in',
  );
  await closePage(late);

  // Remove: asked to confirm, then the member is out and stays out.
  const fay = (await view(owner.page)).participants.find((p) => p.name === 'Fay');
  const strip = owner.page.locator(`[data-testid="strip"][data-peer="${fay.peer}"]`);
  await strip.getByTestId('strip-remove').click();
  await strip.getByTestId('strip-remove-confirm').click();
  const removed = await roomError(friend.page);
  assert.equal(removed.code, 'removed');
  assert.match(removed.text, /You were removed from this room/);
  await until('the owner sees Fay leave', owner.page, (v) => v.participants.length === 0);
  // Long enough for several reconnect attempts of the old backoff (250 ms .. 3 s).
  await new Promise((r) => setTimeout(r, 6000));
  const after = await view(friend.page);
  assert.equal(after.signaling, 'closed');
  assert.equal(after.joined, false);
  assert.deepEqual((await view(owner.page)).participants, [], 'the removed member did not come back');
  const joins = friend.frames.filter((f) => JSON.parse(f).type === 'join').length;
  console.log(`removed member: ${joins} join frames in all (1 at first), signaling ${after.signaling}`);
  assert.equal(joins, 1);

  const errors = pages.flatMap((e) => e.logs).filter((l) => /pageerror/.test(l));
  assert.deepEqual(errors, [], 'no page threw');
});
