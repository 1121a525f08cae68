//! The formats a listener may take of another's stream, from the richest to the poorest: the
//! packets as they were sent (PCM), or the stream re-encoded as Opus at 128 or 64 kbit/s. The
//! hub keeps each sender's stream in these layers and its controller picks one per listener
//! (seeds/003's layered forwarding); in a mesh the sender encodes once per layer its peers
//! take ([`crate::capture`]). Their names are what signaling and the stats view say.

/// What a listener takes of every other sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The sender's own packets, untouched.
    #[default]
    AsSent,
    /// Opus at 128 kbit/s in 2.5 ms frames.
    Opus128,
    /// Opus at 64 kbit/s in 5 ms frames.
    Opus64,
}

/// The Opus layers, in [`Layer::index`] order.
pub const OPUS_LAYERS: [Layer; 2] = [Layer::Opus128, Layer::Opus64];

/// Every layer, in [`Layer::code`] order.
pub const LAYERS: [Layer; 3] = [Layer::AsSent, Layer::Opus128, Layer::Opus64];

impl Layer {
    /// Bit rate and frame (samples at 48 kHz) of an Opus layer. 2.5 ms frames for the least
    /// delay at 128 kbit/s; 5 ms at 64, where 2.5 ms frames lose 12 dB of SNR.
    pub fn opus(self) -> Option<(i32, usize)> {
        match self {
            Layer::AsSent => None,
            Layer::Opus128 => Some((128_000, 120)),
            Layer::Opus64 => Some((64_000, 240)),
        }
    }

    /// The layer's index among [`OPUS_LAYERS`].
    pub fn index(self) -> Option<usize> {
        OPUS_LAYERS.iter().position(|&l| l == self)
    }

    /// Its number on the wire between the engine and its host (0, 1, 2: [`LAYERS`]' order).
    pub fn code(self) -> u8 {
        match self {
            Layer::AsSent => 0,
            Layer::Opus128 => 1,
            Layer::Opus64 => 2,
        }
    }

    /// The layer numbered `code`, or `None`.
    pub fn from_code(code: u32) -> Option<Layer> {
        LAYERS.get(usize::try_from(code).ok()?).copied()
    }

    /// Its name in signaling and stats.
    pub fn name(self) -> &'static str {
        match self {
            Layer::AsSent => "as-sent",
            Layer::Opus128 => "opus-128",
            Layer::Opus64 => "opus-64",
        }
    }

    pub fn from_name(name: &str) -> Option<Layer> {
        LAYERS.into_iter().find(|l| l.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_go_both_ways_and_nothing_else_is_a_layer() {
        for l in LAYERS {
            assert_eq!(Layer::from_code(u32::from(l.code())), Some(l));
            assert_eq!(Layer::from_name(l.name()), Some(l));
        }
        assert_eq!(Layer::from_code(3), None);
        assert_eq!(Layer::from_code(u32::MAX), None);
        assert_eq!(Layer::from_name("pcm"), None);
        assert_eq!(Layer::AsSent.index(), None);
        assert_eq!(Layer::Opus64.index(), Some(1));
    }

    /// The app names the layers in code order (`HUB_LAYERS` in app/src/net/protocol.ts): the
    /// index it sends the engine is the code.
    #[test]
    fn the_app_names_the_layers_in_code_order() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../app/src/net/protocol.ts");
        let ts = std::fs::read_to_string(&path).expect("protocol.ts");
        let line = ts
            .lines()
            .find(|l| l.starts_with("export const HUB_LAYERS"))
            .expect("protocol.ts exports HUB_LAYERS");
        let list = &line[line.find("= [").expect("a list") + 2..];
        let names: Vec<&str> = list
            .trim_matches(|c| matches!(c, '[' | ']' | ';'))
            .split(',')
            .map(|n| n.trim().trim_matches('\''))
            .collect();
        let ours: Vec<&str> = LAYERS.iter().map(|l| l.name()).collect();
        assert_eq!(names, ours);
    }
}
