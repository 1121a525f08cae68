//! Forward mode's delivery figure, summed per room: a listener should receive every packet each
//! other member of its room sent, so the share delivered is the packets received from others
//! over the packets the others sent to the room, `Σ received / Σ (members − 1) · sent` over the
//! rooms, both counted over the same window.
//!
//! A sender's packets and its listeners' receptions are counted on different driver threads,
//! so the totals are kept per room and only divided once every driver's share is in. Each
//! sender's last block is left out of what is due, as mix mode leaves out the block due last:
//! it may still be on its way when the figures are read (one block of a 3 s window is 0.09 %,
//! as much as the knee's margin). The share is capped at 100 %.

/// Per room: its members, the packets they sent, and the packets they received from each other.
#[derive(Clone, Debug, Default)]
pub struct RoomTotals {
    members: Vec<u64>,
    sent: Vec<u64>,
    received: Vec<u64>,
}

impl RoomTotals {
    /// A member of room `room` that sent `sent` packets and received `received` from others.
    pub fn add(&mut self, room: usize, sent: u64, received: u64) {
        if self.members.len() <= room {
            self.members.resize(room + 1, 0);
            self.sent.resize(room + 1, 0);
            self.received.resize(room + 1, 0);
        }
        self.members[room] += 1;
        self.sent[room] += sent;
        self.received[room] += received;
    }

    pub fn merge(&mut self, o: &RoomTotals) {
        for room in 0..o.members.len() {
            if o.members[room] > 0 {
                self.add(room, o.sent[room], o.received[room]);
                // `add` counted one member: the rest of `o`'s.
                self.members[room] += o.members[room] - 1;
            }
        }
    }

    /// Members counted.
    pub fn members(&self) -> u64 {
        self.members.iter().sum()
    }

    /// Packets received of those the others sent, % (None when no member was counted; 100 when
    /// none was sent). Capped at 100: a packet sent just before the window and received in it
    /// counts as received.
    pub fn delivery_pct(&self) -> Option<f64> {
        if self.members() == 0 {
            return None;
        }
        let expected: f64 = self
            .members
            .iter()
            .zip(&self.sent)
            .map(|(&m, &s)| m.saturating_sub(1) as f64 * s.saturating_sub(m) as f64)
            .sum();
        let received: u64 = self.received.iter().sum();
        Some(if expected > 0.0 {
            (100.0 * received as f64 / expected).min(100.0)
        } else {
            100.0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_is_what_the_others_sent_to_each_listener() {
        let mut t = RoomTotals::default();
        assert_eq!(t.delivery_pct(), None);
        // Room 0: three members sent 101 each (the last still on its way); each should hear
        // 200; one heard 150.
        t.add(0, 101, 200);
        t.add(0, 101, 200);
        t.add(0, 101, 150);
        assert!((t.delivery_pct().unwrap() - 100.0 * 550.0 / 600.0).abs() < 1e-9);
        // Room 2 (room 1 empty): two members, each heard all 50 of the other's, and its last.
        t.add(2, 51, 51);
        t.add(2, 51, 51);
        assert!((t.delivery_pct().unwrap() - 100.0 * 652.0 / 700.0).abs() < 1e-9);
        // A member alone in its room expects nothing.
        let mut alone = RoomTotals::default();
        alone.add(0, 100, 0);
        assert_eq!(alone.delivery_pct(), Some(100.0));
    }

    #[test]
    fn totals_from_several_drivers_merge_by_room() {
        let (mut a, mut b) = (RoomTotals::default(), RoomTotals::default());
        a.add(0, 101, 100);
        a.add(1, 101, 90);
        b.add(0, 101, 100);
        b.add(1, 101, 100);
        b.add(1, 101, 200);
        let mut all = RoomTotals::default();
        all.merge(&a);
        all.merge(&b);
        assert_eq!(all.members(), 5);
        // Room 0: 2 members, 200 expected, 200 heard; room 1: 3 members, 600, 390.
        assert!((all.delivery_pct().unwrap() - 100.0 * 590.0 / 800.0).abs() < 1e-9);
    }
}
