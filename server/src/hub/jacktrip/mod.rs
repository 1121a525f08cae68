//! JackTrip clients in a hub room: the hub side of JackTrip's own hub protocol.
//!
//! A JackTrip client (`jacktrip -C HOST -K room/name`) first opens TCP to the hub's
//! `--jacktrip-port` and sends a hello (its UDP port and a 64-byte name); [`handshake`] reads it
//! without I/O, [`listener`] is the TCP side that asks an [`listener::Admit`] implementation (the
//! hub worker) for the UDP port of the slot it gives and answers it. The client then streams
//! JackTrip packets to that port; [`session`] is the sans-IO state of one such client on the UDP
//! side (its real address, its audio format, its exit and its timeout), driven by the worker.

pub mod handshake;
pub mod listener;
pub mod session;
