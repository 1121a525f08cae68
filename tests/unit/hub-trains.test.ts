// The packet pump's hub path with packet trains (train.ts): each message timed in its place of
// its train, the estimate published when the train is whole or a newer one begins, nothing
// counted as a bad bundle, and what is not a train message dropped and counted.
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  N_HUB_BAD_BUNDLES,
  N_HUB_BUNDLES,
  N_HUB_RX_BYTES,
  N_HUB_RX_MESSAGES,
  N_HUB_TRAIN_BPS,
  N_HUB_TRAIN_MESSAGES,
  N_HUB_TRAINS,
} from '../../app/src/net/pump';
import { TRAIN_BYTES } from '../../app/src/net/train';
import { FakeChannel, pumpWithRings } from './fake-channel';

function trainMessage(index: number, train: number): ArrayBuffer {
  const m = new Uint8Array(TRAIN_BYTES);
  m.set([0x54, 0x50, 1, index]);
  new DataView(m.buffer).setUint32(4, train, true);
  return m.buffer;
}

function setup() {
  const t = pumpWithRings(8);
  const hub = new FakeChannel();
  t.pump.setHub(hub as unknown as RTCDataChannel);
  let now = 0;
  vi.spyOn(performance, 'now').mockImplementation(() => now);
  /** Delivers message `index` of train `train` at `atMs`. */
  const at = (atMs: number, index: number, train: number) => {
    now = atMs;
    hub.deliver(trainMessage(index, train));
  };
  return { ...t, hub, at };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('packet pump, hub trains', () => {
  it('times a whole train and publishes its capacity: 1185 wire bytes per 9.48 ms is 1 Mbit/s', () => {
    const t = setup();
    expect(t.stats[N_HUB_TRAIN_BPS]).toBeNaN();
    // A burst between messages 0 and 1, then the path's spacing.
    t.at(1000, 0, 5);
    t.at(1000.02, 1, 5);
    t.at(1009.5, 2, 5);
    expect(t.stats[N_HUB_TRAINS]).toBe(0);
    t.at(1018.98, 3, 5);
    expect(t.stats[N_HUB_TRAINS]).toBe(1);
    expect(t.stats[N_HUB_TRAIN_BPS]).toBeCloseTo(1e6, -2);
    expect(t.stats[N_HUB_TRAIN_MESSAGES]).toBe(4);
    expect(t.stats[N_HUB_RX_MESSAGES]).toBe(4);
    expect(t.stats[N_HUB_RX_BYTES]).toBe(4 * TRAIN_BYTES);
    expect(t.stats[N_HUB_BAD_BUNDLES]).toBe(0);
    expect(t.stats[N_HUB_BUNDLES]).toBe(0);
    // A duplicate of the finished train changes nothing.
    t.at(1020, 3, 5);
    expect(t.stats[N_HUB_TRAINS]).toBe(1);
  });

  it('takes a train that lost its first message when the next one begins; one short of that gives none', () => {
    const t = setup();
    t.at(0, 1, 1);
    t.at(4.74, 2, 1);
    t.at(9.48, 3, 1);
    expect(t.stats[N_HUB_TRAINS]).toBe(0);
    // Train 2 begins: train 1 is as whole as it will be (2 Mbit/s).
    t.at(1000, 0, 2);
    expect(t.stats[N_HUB_TRAINS]).toBe(1);
    expect(t.stats[N_HUB_TRAIN_BPS]).toBeCloseTo(2e6, -2);
    // Train 2 loses message 2: no estimate; the last one stays.
    t.at(1001, 1, 2);
    t.at(1003, 3, 2);
    t.at(2000, 0, 3);
    expect(t.stats[N_HUB_TRAINS]).toBe(1);
    expect(t.stats[N_HUB_TRAIN_BPS]).toBeCloseTo(2e6, -2);
    // A late message of train 2 after train 3 began is only counted.
    t.at(2000.5, 2, 2);
    t.at(2001, 1, 3);
    t.at(2002, 2, 3);
    t.at(2003, 3, 3);
    expect(t.stats[N_HUB_TRAINS]).toBe(2);
    expect(t.stats[N_HUB_TRAIN_BPS]).toBeCloseTo((1185 * 8) / 1e-3, -2);
    expect(t.stats[N_HUB_TRAIN_MESSAGES]).toBe(11);
  });

  it('drops and counts what begins like a train but is not one', () => {
    const t = setup();
    const cut = new Uint8Array(trainMessage(0, 1)).subarray(0, 100).slice().buffer;
    const badIndex = new Uint8Array(trainMessage(0, 1));
    badIndex[3] = 4;
    const badVersion = new Uint8Array(trainMessage(0, 1));
    badVersion[2] = 9;
    t.hub.deliver(cut);
    t.hub.deliver(badIndex.buffer);
    t.hub.deliver(badVersion.buffer);
    expect(t.stats[N_HUB_BAD_BUNDLES]).toBe(3);
    expect(t.stats[N_HUB_TRAIN_MESSAGES]).toBe(0);
    expect(t.stats[N_HUB_RX_MESSAGES]).toBe(3);
  });

  it('numbers trains afresh on a new hub link', () => {
    const t = setup();
    for (let i = 0; i < 4; i++) t.at(i * 9.48, i, 40);
    expect(t.stats[N_HUB_TRAINS]).toBe(1);
    const next = new FakeChannel();
    t.pump.setHub(next as unknown as RTCDataChannel);
    let now = 5000;
    vi.spyOn(performance, 'now').mockImplementation(() => now);
    for (let i = 0; i < 4; i++) {
      now = 5000 + i * 4.74;
      next.deliver(trainMessage(i, 0));
    }
    expect(t.stats[N_HUB_TRAINS]).toBe(2);
    expect(t.stats[N_HUB_TRAIN_BPS]).toBeCloseTo(2e6, -2);
  });
});
