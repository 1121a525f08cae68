//! Packet trains: how a listener measures the capacity of its path from the hub without sending
//! more audio than the path carries.
//!
//! The hub sends a listener [`TRAIN_MESSAGES`] messages of [`TRAIN_BYTES`] back to back on its
//! channel. The narrowest link of the path spaces them by its serialization time, so from the
//! second message on (the first may pass on a token bucket's burst) the listener sees them
//! arrive `wire bytes × 8 / capacity` apart: the capacity, measured in a few milliseconds at the
//! cost of a few kilobytes, where stepping the audio up until it breaks would overshoot the path
//! and lose audio (seeds/003). The listener reports what it measured to the hub's layer
//! controller.
//!
//! # Byte layout
//!
//! ```text
//! offset  size  field
//! ------  ----  ------------------------------------------------------------------------
//!      0     2  magic 'T' 'P'          0x54 0x50
//!      2     1  version                1
//!      3     1  index                  0 ..= TRAIN_MESSAGES − 1, its place in the train
//!      4     4  train                  u32 LE, +1 per train sent to this listener
//!      8     …  zeros                  to TRAIN_BYTES in all
//! ```
//!
//! A train message is exactly [`TRAIN_BYTES`] long; no bundle (magic 'T' 'B') or meters message
//! ('T' 'M') begins like one. `app/src/net/train.ts` reads the same layout, and its constants are
//! compared with these by a test.

/// First two bytes of a train message.
pub const TRAIN_MAGIC: [u8; 2] = *b"TP";
/// Layout version.
pub const TRAIN_VERSION: u8 = 1;
/// Messages per train.
pub const TRAIN_MESSAGES: u8 = 4;
/// Bytes of each message: one datagram of the data channel, under its usual 1200-byte payload.
pub const TRAIN_BYTES: usize = 1100;

/// One train message, as read by [`parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainMessage {
    pub index: u8,
    pub train: u32,
}

/// Why bytes are not a train message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainError {
    Length(usize),
    Magic,
    Version(u8),
    Index(u8),
}

/// Writes message `index` of train `train` into `out` (at least [`TRAIN_BYTES`]); returns
/// [`TRAIN_BYTES`], or `None` when `out` is too short or the index out of range. No allocation.
pub fn write(index: u8, train: u32, out: &mut [u8]) -> Option<usize> {
    let out = out.get_mut(..TRAIN_BYTES)?;
    if index >= TRAIN_MESSAGES {
        return None;
    }
    out.fill(0);
    out[..2].copy_from_slice(&TRAIN_MAGIC);
    out[2] = TRAIN_VERSION;
    out[3] = index;
    out[4..8].copy_from_slice(&train.to_le_bytes());
    Some(TRAIN_BYTES)
}

/// Reads a train message. No allocation.
pub fn parse(bytes: &[u8]) -> Result<TrainMessage, TrainError> {
    if bytes.len() != TRAIN_BYTES {
        return Err(TrainError::Length(bytes.len()));
    }
    if bytes[..2] != TRAIN_MAGIC {
        return Err(TrainError::Magic);
    }
    if bytes[2] != TRAIN_VERSION {
        return Err(TrainError::Version(bytes[2]));
    }
    if bytes[3] >= TRAIN_MESSAGES {
        return Err(TrainError::Index(bytes[3]));
    }
    Ok(TrainMessage {
        index: bytes[3],
        train: u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_written_byte_by_byte_and_read_back() {
        let mut out = [0xAAu8; 1200];
        assert_eq!(write(2, 0x0102_0304, &mut out), Some(TRAIN_BYTES));
        assert_eq!(&out[..8], &[0x54, 0x50, 1, 2, 4, 3, 2, 1]);
        assert!(out[8..TRAIN_BYTES].iter().all(|&b| b == 0));
        assert_eq!(out[TRAIN_BYTES], 0xAA, "nothing written past the message");
        assert_eq!(
            parse(&out[..TRAIN_BYTES]),
            Ok(TrainMessage {
                index: 2,
                train: 0x0102_0304
            })
        );
    }

    #[test]
    fn bad_messages_are_errors() {
        let mut m = [0u8; TRAIN_BYTES];
        write(0, 7, &mut m).unwrap();
        assert_eq!(parse(&m[..TRAIN_BYTES - 1]), Err(TrainError::Length(1099)));
        assert_eq!(write(4, 0, &mut [0u8; TRAIN_BYTES]), None);
        assert_eq!(write(0, 0, &mut [0u8; 100]), None);
        let mut b = m;
        b[1] = b'B';
        assert_eq!(parse(&b), Err(TrainError::Magic));
        let mut b = m;
        b[2] = 2;
        assert_eq!(parse(&b), Err(TrainError::Version(2)));
        let mut b = m;
        b[3] = 4;
        assert_eq!(parse(&b), Err(TrainError::Index(4)));
        // Neither a bundle nor a meters message begins like a train.
        assert_ne!(TRAIN_MAGIC, *b"TB");
        assert_ne!(TRAIN_MAGIC, crate::meters::METERS_MAGIC);
    }
}
