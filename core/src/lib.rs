//! Tutti's audio core: sans-IO, told the time, allocation-free on the render path.

pub mod clock;
pub mod conceal;
pub mod engine;
pub mod jitter;
pub mod mix;
pub mod packet;
pub mod ring;
pub mod stats;
