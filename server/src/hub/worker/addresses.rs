//! Which link a datagram on the worker's socket belongs to, by the address it came from.
//!
//! A browser reaches the hub from several addresses (host, server-reflexive and relayed
//! candidates, one per interface) and checks its backup pairs now and then while it sends on
//! the chosen one. So every address whose ICE check for a link passed stays that link's, up to
//! [`MAX_SOURCES`], the oldest giving way to a new one. Keeping only the latest dropped the
//! chosen pair's audio and SCTP acknowledgements as strangers' whenever a backup pair was
//! checked: every page's queue filled and the room went silent for seconds.
//!
//! An address not seen before is let in only through an ICE check, and only the link whose
//! username fragment the check names is asked ([`Addresses::link_of_ufrag`]), so a stranger's
//! datagrams cost one map lookup, not a check per link.

use std::collections::HashMap;
use std::net::SocketAddr;

/// Most addresses one link is reached from; a further one replaces the oldest.
pub(super) const MAX_SOURCES: usize = 8;

#[derive(Default)]
pub(super) struct Addresses {
    by_addr: HashMap<SocketAddr, usize>,
    /// Links by the hub's ICE username fragment.
    by_ufrag: HashMap<String, usize>,
    /// Per link index, its addresses oldest first.
    sources: Vec<Vec<SocketAddr>>,
}

impl Addresses {
    /// The link datagrams from `source` belong to, if an ICE check from it passed.
    pub(super) fn link_of(&self, source: SocketAddr) -> Option<usize> {
        self.by_addr.get(&source).copied()
    }

    /// The link whose ICE username fragment is `ufrag`: the only one to ask about a check from
    /// an address not seen before.
    pub(super) fn link_of_ufrag(&self, ufrag: &str) -> Option<usize> {
        self.by_ufrag.get(ufrag).copied()
    }

    /// Link `i`, new, answers checks for `ufrag`; it has no address yet.
    pub(super) fn add_link(&mut self, i: usize, ufrag: &str) {
        self.by_ufrag.insert(ufrag.to_owned(), i);
        if self.sources.len() <= i {
            self.sources.resize_with(i + 1, Vec::new);
        }
        self.sources[i].clear();
    }

    /// `source` passed link `i`'s check (or sent it a datagram): it is link `i`'s from now on,
    /// also when another link had it before. The link's oldest address gives way past
    /// [`MAX_SOURCES`].
    pub(super) fn learn(&mut self, i: usize, source: SocketAddr) {
        let Some(list) = self.sources.get_mut(i) else {
            return;
        };
        if !list.contains(&source) {
            if list.len() == MAX_SOURCES {
                let oldest = list.remove(0);
                if self.by_addr.get(&oldest) == Some(&i) {
                    self.by_addr.remove(&oldest);
                }
            }
            list.push(source);
        }
        self.by_addr.insert(source, i);
    }

    /// Link `i` (answering `ufrag`) ended: its addresses and fragment are forgotten, except
    /// those another link has taken since.
    pub(super) fn remove_link(&mut self, i: usize, ufrag: &str) {
        if let Some(list) = self.sources.get_mut(i) {
            for source in list.drain(..) {
                if self.by_addr.get(&source) == Some(&i) {
                    self.by_addr.remove(&source);
                }
            }
        }
        if self.by_ufrag.get(ufrag) == Some(&i) {
            self.by_ufrag.remove(ufrag);
        }
    }

    /// Link `i`'s addresses, oldest first.
    #[cfg(test)]
    fn sources(&self, i: usize) -> &[SocketAddr] {
        self.sources.get(i).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn a_backup_pair_check_keeps_the_chosen_pair() {
        let mut a = Addresses::default();
        a.add_link(0, "hubA");
        a.learn(0, addr(5000)); // the chosen pair
        a.learn(0, addr(5001)); // a backup pair's check, later
        assert_eq!(
            a.link_of(addr(5000)),
            Some(0),
            "the chosen pair's audio still counts"
        );
        assert_eq!(a.link_of(addr(5001)), Some(0));
        assert_eq!(a.link_of(addr(5002)), None);
        assert_eq!(a.link_of_ufrag("hubA"), Some(0));
        assert_eq!(a.link_of_ufrag("hubB"), None);
    }

    #[test]
    fn past_the_bound_the_oldest_address_gives_way() {
        let mut a = Addresses::default();
        a.add_link(3, "hubA");
        for k in 0..=MAX_SOURCES as u16 {
            a.learn(3, addr(6000 + k));
        }
        assert_eq!(a.sources(3).len(), MAX_SOURCES);
        assert_eq!(a.link_of(addr(6000)), None, "the oldest went");
        for k in 1..=MAX_SOURCES as u16 {
            assert_eq!(a.link_of(addr(6000 + k)), Some(3));
        }
        // Learning a known address again neither grows the list nor moves anything out.
        a.learn(3, addr(6001));
        assert_eq!(a.sources(3).len(), MAX_SOURCES);
        assert_eq!(a.link_of(addr(6001)), Some(3));
    }

    #[test]
    fn an_address_another_link_took_is_not_removed_with_the_first() {
        let mut a = Addresses::default();
        a.add_link(0, "hubA");
        a.add_link(1, "hubB");
        a.learn(0, addr(7000));
        a.learn(0, addr(7001));
        // The browser behind link 0 left and a new one got its port (NAT reuse).
        a.learn(1, addr(7001));
        assert_eq!(a.link_of(addr(7001)), Some(1));
        // Link 0 evicting it, or ending, leaves link 1's mapping alone.
        for k in 0..MAX_SOURCES as u16 {
            a.learn(0, addr(7100 + k));
        }
        assert_eq!(a.link_of(addr(7001)), Some(1));
        a.remove_link(0, "hubA");
        assert_eq!(a.link_of(addr(7001)), Some(1));
        assert_eq!(a.link_of(addr(7000)), None);
        assert_eq!(a.link_of(addr(7105)), None);
        assert_eq!(a.link_of_ufrag("hubA"), None);
        assert_eq!(a.link_of_ufrag("hubB"), Some(1));
    }

    #[test]
    fn a_reused_index_starts_with_no_address() {
        let mut a = Addresses::default();
        a.add_link(0, "hubA");
        a.learn(0, addr(8000));
        a.remove_link(0, "hubA");
        a.add_link(0, "hubC");
        assert!(a.sources(0).is_empty());
        assert_eq!(a.link_of(addr(8000)), None);
        assert_eq!(a.link_of_ufrag("hubC"), Some(0));
    }

    #[test]
    fn learning_for_an_unknown_link_is_ignored() {
        let mut a = Addresses::default();
        a.learn(5, addr(9000));
        assert_eq!(a.link_of(addr(9000)), None);
    }
}
