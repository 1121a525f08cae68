//! Mix-minus: every listener's personal mix of the same N sources — the room minus the listener's
//! own voice, with that listener's own fader, pan, mute and solo — in O(N) per block for the whole
//! room instead of O(N²).
//!
//! A hub in mix mode sends each client one stream. Mixing each listener's N − 1 sources from
//! scratch costs N multiply-adds per listener and sample, N² for the room: at 500 players that is
//! 250,000 per sample. Most listeners leave most faders where they were, so the room is summed
//! once and each listener only pays for what it changed:
//! - once per block, [`MixMinus::sum`] adds up every live source, unscaled: `S = Σ x_j`;
//! - per listener `i`, [`MixMinus::render`] takes the *base* `D·(S − x_i − Σ_{c∈C_i} x_c)` — every
//!   source the listener left at the room default `D` (unity gain, centre: [`pan_gains`]`(0)`),
//!   less its own voice and less `C_i`, the sources it changed — and adds each changed source
//!   through the listener's own [`Strip`] for it (ramped gain and pan, mute, solo), then runs the
//!   listener's own [`Master`] (limiter, meters).
//!
//! A block then costs N for the sum and `1 + |C_i|` block operations per listener: O(N + Σ|C_i|)
//! for the room. A change that is back at the default and has finished its ramp leaves `C_i`, so a
//! listener who moves a fader and puts it back costs nothing afterwards.
//!
//! Solo: a listener who solos anyone hears only its soloed strips. The base then ramps to zero
//! over one block — exactly what each unsoloed default strip would do — and back when the last
//! solo goes; a change made while soloing starts from where its default strip stood.
//!
//! The result is the direct mix — one [`Strip`] per (listener, source), each settled at the
//! default until the listener changes it, summed and limited per listener — to f32 rounding; the
//! tests hold it to that oracle over random changes.
//!
//! Hostile sources: a source block holding NaN, ±∞ or a sample beyond ±[`MAX_SOURCE_PEAK`] is left
//! out of that block for every listener and counted in [`MixMinus::rejected_blocks`]. Decoded
//! packets cannot hold one (the packet decoder clamps), but whatever else feeds a source later (a
//! decoder of another format) is held to the same rule here, where one bad sample would otherwise
//! poison the shared sum and every listener's limiter would silence the room.
//!
//! Source meters: the scan that checks each source block also meters it, with the ballistics of
//! a strip's pre-fader meter (peak hold and fall, RMS), so a hub can tell each listener how loud
//! every player arrives ([`MixMinus::source_meter`]) at no extra pass over the samples.
//!
//! Rooms over several hubs: a hub that carries part of a room sends the hub at the centre its
//! players' raw sum ([`MixMinus::room_sum`]), which that hub mixes as one more source, panned and
//! scaled like any; what comes back is already a mix at the room's default levels, so
//! [`MixMinus::render_plus`] adds it at unit gain before each listener's master section.
//!
//! Real-time safety: [`MixMinus::new`] allocates every listener's change list up front; the block
//! functions and the setters allocate, lock and panic on nothing.

use super::kernels::scan;
use super::meter::MeterState;
use super::simd::Simd;
use super::{pan_gains, solo_audible, Master, Meter, Strip, QUANTUM};

/// Largest sample magnitude a source block may hold (+12 dBFS); a block with a larger one, or a
/// non-finite one, is rejected for that block.
pub const MAX_SOURCE_PEAK: f32 = 4.0;

/// Why a mix-minus call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixMinusError {
    /// The slot is at or beyond the capacity given to [`MixMinus::new`].
    NoSuchSlot(usize),
    /// A listener's own voice is never in its mix, so it has no strip for it.
    OwnVoice(usize),
    /// The listener already has as many sources away from the default as [`MixMinus::new`] allowed.
    TooManyChanges(usize),
}

impl core::fmt::Display for MixMinusError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (slot, what) = match *self {
            MixMinusError::NoSuchSlot(s) => (s, "is not a slot of this mix"),
            MixMinusError::OwnVoice(s) => (s, "has no strip for its own voice"),
            MixMinusError::TooManyChanges(s) => (s, "has changed as many sources as it may"),
        };
        write!(f, "slot {slot} {what}")
    }
}

impl std::error::Error for MixMinusError {}

/// The room's source blocks for one quantum, by slot: `None` where a slot has no live source (an
/// empty slot, a listen-only client, a source with nothing to play).
pub trait Sources {
    /// Source `slot`'s left and right block.
    fn block(&self, slot: usize) -> Option<(&[f32; QUANTUM], &[f32; QUANTUM])>;
}

/// Blocks held in memory, one optional `[left, right]` pair per slot.
impl Sources for [Option<[[f32; QUANTUM]; 2]>] {
    fn block(&self, slot: usize) -> Option<(&[f32; QUANTUM], &[f32; QUANTUM])> {
        self.get(slot)?.as_ref().map(|[l, r]| (l, r))
    }
}

/// One source a listener set away from the default, with the listener's strip for it.
#[derive(Clone, Debug)]
struct Change {
    source: usize,
    strip: Strip,
}

/// One listener's state: its changes, the base's weight and its master section.
#[derive(Clone, Debug)]
struct Listener {
    /// At most `max_changes` entries; allocated once, never grown.
    changes: Vec<Change>,
    /// The base's weight reached at the end of the last block: 1, or 0 while soloing.
    base: f32,
    master: Master,
}

impl Listener {
    fn new(max_changes: usize) -> Listener {
        Listener {
            changes: Vec::with_capacity(max_changes),
            base: 1.0,
            master: Master::new(),
        }
    }
}

/// Every listener's mix-minus of one room. See the module docs.
#[derive(Clone, Debug)]
pub struct MixMinus {
    /// `S`, every live source of this block summed, unscaled.
    sum: [[f32; QUANTUM]; 2],
    /// Which slots' blocks went into `sum` (finite and within [`MAX_SOURCE_PEAK`]).
    live: Box<[bool]>,
    /// Blocks rejected per slot.
    rejected: Box<[u64]>,
    /// Each source's pre-fader meter.
    meters: Box<[MeterState]>,
    /// `D`: the default strip's left and right factors.
    default: [f32; 2],
    max_changes: usize,
    listeners: Box<[Listener]>,
}

impl MixMinus {
    /// A mix for slots `0..slots` (each slot is one client: a source, a listener, or both), each
    /// listener allowed `max_changes` sources away from the default. Allocates: call it off the
    /// render path.
    pub fn new(slots: usize, max_changes: usize) -> MixMinus {
        let (l, r) = pan_gains(0.0);
        MixMinus {
            sum: [[0.0; QUANTUM]; 2],
            live: vec![false; slots].into_boxed_slice(),
            rejected: vec![0; slots].into_boxed_slice(),
            meters: vec![MeterState::default(); slots].into_boxed_slice(),
            default: [l, r],
            max_changes,
            listeners: (0..slots).map(|_| Listener::new(max_changes)).collect(),
        }
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.listeners.len()
    }

    /// `S` of the last [`MixMinus::sum`]: every live source of the block added at unit gain,
    /// not panned, not limited (what one hub sends another as its share of a room).
    pub fn room_sum(&self) -> (&[f32; QUANTUM], &[f32; QUANTUM]) {
        (&self.sum[0], &self.sum[1])
    }

    /// Sums this block's live sources (slots beyond the capacity are not read) and meters each.
    /// Call it once per block, before [`MixMinus::render`] for each listener with the same
    /// `sources`.
    pub fn sum(&mut self, sources: &(impl Sources + ?Sized)) {
        let [sum_l, sum_r] = &mut self.sum;
        sum_l.fill(0.0);
        sum_r.fill(0.0);
        for (slot, live) in self.live.iter_mut().enumerate() {
            *live = false;
            let Some((l, r)) = sources.block(slot) else {
                continue;
            };
            // One scan checks the block and meters it: a non-finite sample makes the sum of
            // squares non-finite; its largest magnitude is the peak.
            let stats = scan::<Simd>(l, r, QUANTUM);
            if !(stats.is_finite()
                && stats.peak[0] <= MAX_SOURCE_PEAK
                && stats.peak[1] <= MAX_SOURCE_PEAK)
            {
                self.rejected[slot] += 1;
                continue;
            }
            self.meters[slot].update(QUANTUM, &stats);
            *live = true;
            add(sum_l, l, 1.0);
            add(sum_r, r, 1.0);
        }
    }

    /// Listener `listener`'s mix of this block into `out_l`/`out_r` (overwritten): the last
    /// [`MixMinus::sum`] less its own voice, its changes applied, through its master section.
    /// `sources` must be what the last `sum` was given.
    pub fn render(
        &mut self,
        listener: usize,
        sources: &(impl Sources + ?Sized),
        out_l: &mut [f32; QUANTUM],
        out_r: &mut [f32; QUANTUM],
    ) -> Result<(), MixMinusError> {
        self.render_plus(listener, sources, None, out_l, out_r)
    }

    /// [`MixMinus::render`] with `extra`, a block that is already a mix (another hub's share of
    /// the room), added at unit gain before the listener's master section: not panned, not
    /// scaled by the default strip, untouched by the listener's strips and solo. A non-finite
    /// `extra`, or one beyond ±[`MAX_SOURCE_PEAK`], is left out of this block like a hostile
    /// source. Real-time safe.
    pub fn render_plus(
        &mut self,
        listener: usize,
        sources: &(impl Sources + ?Sized),
        extra: Option<(&[f32; QUANTUM], &[f32; QUANTUM])>,
        out_l: &mut [f32; QUANTUM],
        out_r: &mut [f32; QUANTUM],
    ) -> Result<(), MixMinusError> {
        let live = &self.live;
        let heard = |slot: usize| {
            if live[slot] {
                sources.block(slot)
            } else {
                None
            }
        };
        let who = self
            .listeners
            .get_mut(listener)
            .ok_or(MixMinusError::NoSuchSlot(listener))?;
        // The base, unscaled: the sum less the listener's own voice and its changed sources.
        out_l.copy_from_slice(&self.sum[0]);
        out_r.copy_from_slice(&self.sum[1]);
        if let Some((l, r)) = heard(listener) {
            add(out_l, l, -1.0);
            add(out_r, r, -1.0);
        }
        let mut any_solo = false;
        for change in &who.changes {
            any_solo |= change.strip.solo();
            if let Some((l, r)) = heard(change.source) {
                add(out_l, l, -1.0);
                add(out_r, r, -1.0);
            }
        }
        // Scale it by the default factors, ramped from the last block's weight to this one's.
        let base = if any_solo { 0.0 } else { 1.0 };
        scale_ramped(out_l, self.default[0], who.base, base);
        scale_ramped(out_r, self.default[1], who.base, base);
        who.base = base;
        for change in who.changes.iter_mut() {
            if let Some((l, r)) = heard(change.source) {
                let audible = solo_audible(any_solo, change.strip.solo(), change.strip.mute());
                change.strip.mix_into(l, r, out_l, out_r, audible);
            }
        }
        if let Some((l, r)) = extra {
            let stats = scan::<Simd>(l, r, QUANTUM);
            if stats.is_finite()
                && stats.peak[0] <= MAX_SOURCE_PEAK
                && stats.peak[1] <= MAX_SOURCE_PEAK
            {
                add(out_l, l, 1.0);
                add(out_r, r, 1.0);
            }
        }
        who.master.process(out_l, out_r);
        // Changes back at the default, and settled where the base now stands, rejoin the base.
        let settled = [self.default[0] * base, self.default[1] * base];
        let mut k = 0;
        while k < who.changes.len() {
            if is_default(&who.changes[k].strip) && who.changes[k].strip.current_gains() == settled
            {
                who.changes.swap_remove(k);
            } else {
                k += 1;
            }
        }
        Ok(())
    }

    /// Listener `listener`'s strip for source `source`, to set its gain ([`GainControl`](super::GainControl)),
    /// pan, mute or solo; the change is ramped in over the next block. A source the listener had
    /// left at the default gets a strip settled where the default stood (no fade), counted
    /// against the listener's `max_changes`.
    pub fn strip_mut(
        &mut self,
        listener: usize,
        source: usize,
    ) -> Result<&mut Strip, MixMinusError> {
        let slots = self.slots();
        if source >= slots {
            return Err(MixMinusError::NoSuchSlot(source));
        }
        if source == listener {
            return Err(MixMinusError::OwnVoice(listener));
        }
        let default = self.default;
        let max_changes = self.max_changes;
        let who = self
            .listeners
            .get_mut(listener)
            .ok_or(MixMinusError::NoSuchSlot(listener))?;
        let at = match who.changes.iter().position(|c| c.source == source) {
            Some(at) => at,
            None if who.changes.len() >= max_changes => {
                return Err(MixMinusError::TooManyChanges(listener));
            }
            None => {
                let current = [default[0] * who.base, default[1] * who.base];
                who.changes.push(Change {
                    source,
                    strip: Strip::settled(current),
                });
                who.changes.len() - 1
            }
        };
        Ok(&mut who.changes[at].strip)
    }

    /// Listener `listener`'s strip for `source` if it changed that source (`None`: the default).
    pub fn strip(&self, listener: usize, source: usize) -> Option<&Strip> {
        let who = self.listeners.get(listener)?;
        who.changes
            .iter()
            .find(|c| c.source == source)
            .map(|c| &c.strip)
    }

    /// How many sources listener `listener` has away from the default (its cost per block).
    pub fn changes(&self, listener: usize) -> usize {
        self.listeners.get(listener).map_or(0, |w| w.changes.len())
    }

    /// Listener `listener`'s master section (its limiter and output meters).
    pub fn master(&self, listener: usize) -> Option<&Master> {
        self.listeners.get(listener).map(|w| &w.master)
    }

    /// Listener `listener`'s master section, to set its master gain.
    pub fn master_mut(&mut self, listener: usize) -> Option<&mut Master> {
        self.listeners.get_mut(listener).map(|w| &mut w.master)
    }

    /// Forgets what listener `slot` set (its changes, its master section) and its rejected count,
    /// for a new client taking the slot. Keeps the change list's allocation.
    pub fn clear(&mut self, slot: usize) -> Result<(), MixMinusError> {
        let who = self
            .listeners
            .get_mut(slot)
            .ok_or(MixMinusError::NoSuchSlot(slot))?;
        who.changes.clear();
        who.base = 1.0;
        who.master = Master::new();
        self.rejected[slot] = 0;
        Ok(())
    }

    /// Source `slot`'s pre-fader meter: how loud that player arrives, before anyone's fader.
    /// Blocks left out (non-finite, too large) are not metered; a slot no block came to reads
    /// silence.
    pub fn source_meter(&self, slot: usize) -> Option<Meter> {
        self.meters.get(slot).map(MeterState::reading)
    }

    /// Forgets every listener's strip for source `slot` (its client left), so that whoever takes
    /// the slot next starts at the default for everyone, and the slot's meter. Keeps the change
    /// lists' allocations.
    pub fn forget_source(&mut self, slot: usize) {
        if let Some(m) = self.meters.get_mut(slot) {
            *m = MeterState::default();
        }
        for who in self.listeners.iter_mut() {
            if let Some(at) = who.changes.iter().position(|c| c.source == slot) {
                who.changes.swap_remove(at);
            }
        }
    }

    /// Source blocks of `slot` left out for a non-finite or too large sample.
    pub fn rejected_blocks(&self, slot: usize) -> u64 {
        self.rejected.get(slot).copied().unwrap_or(0)
    }
}

/// Whether a strip is at the room default: unity gain, centre, not muted or soloed.
fn is_default(strip: &Strip) -> bool {
    use super::GainControl;
    strip.gain() == 1.0 && strip.pan() == 0.0 && !strip.mute() && !strip.solo()
}

/// `out += k·x`.
fn add(out: &mut [f32; QUANTUM], x: &[f32; QUANTUM], k: f32) {
    for (o, x) in out.iter_mut().zip(x) {
        *o += k * x;
    }
}

/// `out[i] *= d·w(i)`, with `w` the strips' ramp from `from` (the last block's end) to `to`:
/// `from + (to − from)·(i + 1)/n`.
fn scale_ramped(out: &mut [f32; QUANTUM], d: f32, from: f32, to: f32) {
    if from == to {
        let k = d * to;
        out.iter_mut().for_each(|o| *o *= k);
        return;
    }
    let step = (to - from) / QUANTUM as f32;
    for (i, o) in out.iter_mut().enumerate() {
        *o *= d * (from + step * (i + 1) as f32);
    }
}

#[cfg(test)]
mod tests;
