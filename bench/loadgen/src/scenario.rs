//! A load scenario: which server, how many rooms of how many clients, how fast they join, how
//! long the measure runs, how many come and go meanwhile. Read from TOML; every field has a
//! default here and only here, and a value out of range is an error that names the field.
//!
//! ```toml
//! server = "tutti-hub"      # or "jacktrip" (jacktrip -S -p 2 on a dummy JACK server)
//! rooms = 1
//! clients = 200             # per room; every client sends its own tone and hears the room
//! join_per_second = 50
//! warmup_seconds = 3
//! seconds = 20              # the measuring window
//! churn_per_second = 0.0    # clients that leave, and as many that join, per second
//! spot_checks = 2           # listeners per room whose audio is checked for the room's tones
//! hubs = 1                  # tutti-hub: hub processes sharing the rooms (Redis between them)
//! mode = "mix"              # tutti-hub: "mix", or "forward" (WebRTC clients, as the app's)
//! ```
//!
//! With `hubs` above 1 the load generator starts `redis-server` and that many Tutti servers
//! sharing it; each room is opened on every hub, and its clients are dealt to the hubs in
//! turn, so a room spans them all (the first hub to get a client is the room's home, the
//! others link to it).
//!
//! In mix mode the clients speak JackTrip's protocol (16-bit, stereo, 48 kHz, `frames` per
//! packet), which both servers serve; the server sends each one the mix of its room minus its
//! own voice. In forward mode (this project's hub only) every client is the app's: it joins its
//! room over the signaling WebSocket, links to the hub over WebRTC and sends 16-bit mono
//! packets on the hub's data channel; the hub sends it one bundle per block of the other
//! members' packets. Forward mode takes no churn and one hub: its clients join once, and a
//! room's members all reach the same hub.

use serde::Deserialize;

/// The servers the load generator can start and measure.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ServerName {
    /// This project's server with its hub (JackTrip clients always get their room's mix).
    TuttiHub,
    /// Debian's `jacktrip -S -p 2` (mix-minus patching) on `jackd -d dummy`.
    Jacktrip,
}

impl ServerName {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerName::TuttiHub => "tutti-hub",
            ServerName::Jacktrip => "jacktrip",
        }
    }
}

/// How this project's hub carries a room's audio.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Each client gets its room's mix minus its own voice (JackTrip clients).
    Mix,
    /// Each client gets the other members' packets as they came (WebRTC clients).
    Forward,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Mix => "mix",
            Mode::Forward => "forward",
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    /// A label for the output.
    pub name: String,
    pub server: ServerName,
    pub rooms: usize,
    /// Clients per room.
    pub clients: usize,
    pub join_per_second: f64,
    pub warmup_seconds: f64,
    pub seconds: f64,
    /// Frames per packet: 32, 64, 128 or 256.
    pub frames: u16,
    pub churn_per_second: f64,
    pub spot_checks: usize,
    /// Emulator threads (0: one per core).
    pub threads: usize,
    /// The hub's worker threads (`--hub-threads`; 0: one per core).
    pub hub_threads: u32,
    /// Tutti hub processes sharing the rooms.
    pub hubs: usize,
    pub mode: Mode,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            name: "unnamed".into(),
            server: ServerName::TuttiHub,
            rooms: 1,
            clients: 8,
            join_per_second: 50.0,
            warmup_seconds: 3.0,
            seconds: 20.0,
            frames: 128,
            churn_per_second: 0.0,
            spot_checks: 2,
            threads: 0,
            hub_threads: 0,
            hubs: 1,
            mode: Mode::Mix,
        }
    }
}

/// Most hub processes in one run.
pub const MAX_HUBS: usize = 8;
/// Most clients in one run (the hub's rooms hold 512 each).
pub const MAX_CLIENTS: usize = 2000;
/// Longest measuring window, s.
pub const MAX_SECONDS: f64 = 3600.0;

impl Scenario {
    pub fn from_toml(text: &str) -> Result<Scenario, String> {
        let s: Scenario = toml::from_str(text).map_err(|e| format!("scenario: {e}"))?;
        s.validate()?;
        Ok(s)
    }

    pub fn validate(&self) -> Result<(), String> {
        let bad = |field: &str, why: &str| Err(format!("scenario {}: {field} {why}", self.name));
        if self.rooms == 0 || self.clients == 0 {
            return bad("rooms, clients", "must be at least 1");
        }
        if self.rooms * self.clients > MAX_CLIENTS {
            return bad("rooms × clients", &format!("must be at most {MAX_CLIENTS}"));
        }
        if !(self.join_per_second > 0.0 && self.join_per_second <= 1000.0) {
            return bad("join_per_second", "must be in (0, 1000]");
        }
        if !(self.warmup_seconds >= 0.0 && self.warmup_seconds <= 600.0) {
            return bad("warmup_seconds", "must be in [0, 600]");
        }
        if !(self.seconds >= 1.0 && self.seconds <= MAX_SECONDS) {
            return bad("seconds", &format!("must be in [1, {MAX_SECONDS}]"));
        }
        if ![32, 64, 128, 256].contains(&self.frames) {
            return bad("frames", "must be 32, 64, 128 or 256");
        }
        if !(self.churn_per_second >= 0.0 && self.churn_per_second <= 100.0) {
            return bad("churn_per_second", "must be in [0, 100]");
        }
        if self.spot_checks > self.clients {
            return bad("spot_checks", "must be at most clients");
        }
        if self.server == ServerName::Jacktrip && self.rooms != 1 {
            return bad("rooms", "must be 1 for jacktrip (its hub has one room)");
        }
        if self.hubs == 0 || self.hubs > MAX_HUBS {
            return bad("hubs", &format!("must be in [1, {MAX_HUBS}]"));
        }
        if self.server == ServerName::Jacktrip && self.hubs != 1 {
            return bad(
                "hubs",
                "must be 1 for jacktrip (its hubs do not share rooms)",
            );
        }
        if self.mode == Mode::Forward {
            if self.server != ServerName::TuttiHub {
                return bad("mode", "forward needs server = \"tutti-hub\"");
            }
            if self.hubs != 1 {
                return bad("mode", "forward runs on one hub (hubs = 1)");
            }
            if self.churn_per_second != 0.0 {
                return bad("mode", "forward takes no churn (churn_per_second = 0)");
            }
        }
        if self.threads > 64 {
            return bad("threads", "must be at most 64");
        }
        Ok(())
    }

    /// All clients.
    pub fn total(&self) -> usize {
        self.rooms * self.clients
    }
}

/// One line of the sweep: a server, and for this project's hub a mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    /// One room, mix mode, JackTrip clients: the server's own line.
    Mix(ServerName),
    /// Rooms of [`FORWARD_ROOM`] on this project's hub in forward mode, the app's clients.
    Forward,
}

/// The size of the forward sweep's rooms: a band.
pub const FORWARD_ROOM: usize = 5;

impl Series {
    /// `tutti-hub`, `jacktrip` or `tutti-hub-forward`.
    pub fn parse(name: &str) -> Result<Series, String> {
        match name {
            "tutti-hub" => Ok(Series::Mix(ServerName::TuttiHub)),
            "jacktrip" => Ok(Series::Mix(ServerName::Jacktrip)),
            "tutti-hub-forward" => Ok(Series::Forward),
            other => Err(format!(
                "{other:?} is none of tutti-hub, jacktrip, tutti-hub-forward"
            )),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Series::Mix(server) => server.as_str(),
            Series::Forward => "tutti-hub-forward",
        }
    }

    /// The sweep's scenario for `n` clients measured for `seconds`; None when `n` does not
    /// make whole rooms.
    pub fn scenario(self, n: usize, seconds: f64) -> Option<Scenario> {
        let base = Scenario {
            name: format!("sweep-{}-{n}", self.label()),
            seconds,
            join_per_second: 20.0,
            ..Scenario::default()
        };
        match self {
            Series::Mix(server) => Some(Scenario {
                server,
                clients: n,
                spot_checks: n.min(2),
                ..base
            }),
            Series::Forward => (n % FORWARD_ROOM == 0 && n > 0).then_some(Scenario {
                mode: Mode::Forward,
                rooms: n / FORWARD_ROOM,
                clients: FORWARD_ROOM,
                spot_checks: 1,
                ..base
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_reads_with_defaults_for_what_it_leaves_out() {
        let s =
            Scenario::from_toml("name = \"choir\"\nserver = \"jacktrip\"\nclients = 30\n").unwrap();
        assert_eq!(
            (s.server, s.clients, s.rooms, s.frames),
            (ServerName::Jacktrip, 30, 1, 128)
        );
        assert_eq!(s.total(), 30);
        assert_eq!(s.mode, Mode::Mix);
        let f = Scenario::from_toml("mode = \"forward\"\nrooms = 2\nclients = 3\n").unwrap();
        assert_eq!(
            (f.mode, f.server, f.total()),
            (Mode::Forward, ServerName::TuttiHub, 6)
        );
    }

    #[test]
    fn the_sweep_s_forward_line_is_rooms_of_five() {
        let f = Series::parse("tutti-hub-forward").unwrap();
        let s = f.scenario(50, 10.0).unwrap();
        assert_eq!(
            (s.mode, s.rooms, s.clients, s.total()),
            (Mode::Forward, 10, 5, 50)
        );
        assert!(s.validate().is_ok());
        assert!(f.scenario(12, 10.0).is_none());
        let m = Series::parse("jacktrip")
            .unwrap()
            .scenario(30, 10.0)
            .unwrap();
        assert_eq!((m.mode, m.rooms, m.clients), (Mode::Mix, 1, 30));
        assert!(Series::parse("mesh").unwrap_err().contains("mesh"));
    }

    #[test]
    fn bad_values_and_unknown_fields_are_errors_naming_the_field() {
        for (text, field) in [
            ("clients = 0", "clients"),
            ("frames = 100", "frames"),
            ("seconds = 0.5", "seconds"),
            ("join_per_second = -1", "join_per_second"),
            ("rooms = 10\nclients = 500", "rooms × clients"),
            ("spot_checks = 9", "spot_checks"),
            ("server = \"jamulus\"", "server"),
            ("clinets = 5", "clinets"),
            ("server = \"jacktrip\"\nrooms = 2", "rooms"),
            ("hubs = 0", "hubs"),
            ("hubs = 9", "hubs"),
            ("server = \"jacktrip\"\nhubs = 2", "hubs"),
            ("mode = \"mesh\"", "mode"),
            ("server = \"jacktrip\"\nmode = \"forward\"", "mode"),
            ("mode = \"forward\"\nhubs = 2", "mode"),
            ("mode = \"forward\"\nchurn_per_second = 1", "mode"),
        ] {
            let e = Scenario::from_toml(text).unwrap_err();
            assert!(e.contains(field), "{text}: {e}");
        }
    }
}
