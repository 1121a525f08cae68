//! Where rooms are kept across restarts: an SQLite database (`rooms.sqlite3` in `--data-dir`)
//! written through [`Store`], a mirror of what [`crate::rooms`] holds in memory. The rooms
//! decide everything (who joins, what expires) and tell the store each change as it happens;
//! the store only writes it down and gives it all back at start.
//!
//! What is kept per room: its name, the SHA-256 of its private key (if any), the Argon2id hash
//! of its password (if any), the SHA-256 of its owner secret, whether it is locked and since
//! when it is empty; per member, the peer id, the SHA-256 of its token, whether it is an owner
//! and since when it is away (not connected); per ban, the SHA-256 of the token and until
//! when. Never a password, key, token or owner secret in clear.
//!
//! Each change is one short transaction of a few statements on a local file (WAL journal,
//! `synchronous=NORMAL`: a crash of the process loses nothing, a power cut at most the last
//! moments). The database is opened in exclusive locking mode, so a second server on the same
//! directory fails at start instead of sharing it. Errors after start (disk full) are logged,
//! at most one line per minute, and the server goes on from memory.
//!
//! `--no-persist` uses [`NoStore`], which keeps nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, ToSql};

use crate::password::Digest32;
use crate::room::RoomId;

/// The database file's name inside the data directory.
pub const DB_FILE: &str = "rooms.sqlite3";
/// The schema this code writes (SQLite's `user_version`).
const SCHEMA_VERSION: i64 = 1;
/// At most one log line about write errors per this long.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// A room's own row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomRecord {
    /// Argon2id PHC string.
    pub password: Option<String>,
    pub owner: Digest32,
    pub locked: bool,
    /// Unix milliseconds since the room has had no connected member.
    pub empty_since: Option<u64>,
}

/// A member's row: a peer id reserved for its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    pub peer: String,
    pub token: Digest32,
    pub owner: bool,
    /// Unix milliseconds since the member has not been connected.
    pub away_since: Option<u64>,
}

/// A token refused by a room until a time (Unix milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BanRecord {
    pub token: Digest32,
    pub until: u64,
}

/// Everything kept about one room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRoom {
    pub id: RoomId,
    pub room: RoomRecord,
    pub members: Vec<MemberRecord>,
    pub bans: Vec<BanRecord>,
}

/// Where the rooms write their changes. Implementations must be quick: they are called under
/// the rooms' lock.
pub trait Store: Send {
    /// Every room kept, for a start.
    fn load(&mut self) -> Result<Vec<StoredRoom>, String>;
    fn put_room(&mut self, id: &RoomId, room: &RoomRecord);
    /// Deletes the room with its members and bans.
    fn delete_room(&mut self, id: &RoomId);
    fn put_member(&mut self, id: &RoomId, member: &MemberRecord);
    fn delete_member(&mut self, id: &RoomId, peer: &str);
    fn put_ban(&mut self, id: &RoomId, ban: &BanRecord);
    fn delete_ban(&mut self, id: &RoomId, token: &Digest32);
}

/// Keeps nothing (`--no-persist`): rooms live in memory only.
pub struct NoStore;

impl Store for NoStore {
    fn load(&mut self) -> Result<Vec<StoredRoom>, String> {
        Ok(Vec::new())
    }
    fn put_room(&mut self, _: &RoomId, _: &RoomRecord) {}
    fn delete_room(&mut self, _: &RoomId) {}
    fn put_member(&mut self, _: &RoomId, _: &MemberRecord) {}
    fn delete_member(&mut self, _: &RoomId, _: &str) {}
    fn put_ban(&mut self, _: &RoomId, _: &BanRecord) {}
    fn delete_ban(&mut self, _: &RoomId, _: &Digest32) {}
}

/// The SQLite store.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    errors: u64,
    last_error_log: Option<Instant>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rooms (
    name TEXT NOT NULL,
    key BLOB NOT NULL,
    password TEXT,
    owner BLOB NOT NULL,
    locked INTEGER NOT NULL,
    empty_since INTEGER,
    PRIMARY KEY (name, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS members (
    name TEXT NOT NULL,
    key BLOB NOT NULL,
    peer TEXT NOT NULL,
    token BLOB NOT NULL,
    owner INTEGER NOT NULL,
    away_since INTEGER,
    PRIMARY KEY (name, key, peer)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bans (
    name TEXT NOT NULL,
    key BLOB NOT NULL,
    token BLOB NOT NULL,
    until INTEGER NOT NULL,
    PRIMARY KEY (name, key, token)
) WITHOUT ROWID;
";

impl SqliteStore {
    /// Opens (creating if needed) `dir/rooms.sqlite3`, checks that it is a database of ours
    /// that this process alone can write. The error is a sentence for the operator.
    pub fn open(dir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "Cannot create the data directory {} (--data-dir, TUTTI_DATA_DIR): {e}. Choose \
                 a writable directory, or run with --no-persist to keep rooms in memory only.",
                dir.display()
            )
        })?;
        let path = dir.join(DB_FILE);
        let conn = Connection::open(&path).map_err(|e| open_error(&path, &e.to_string()))?;
        Self::init(conn, path)
    }

    /// A database in memory (for tests: the real SQL, no file).
    pub fn open_in_memory() -> Result<Self, String> {
        let conn = Connection::open_in_memory().map_err(|e| e.to_string())?;
        Self::init(conn, PathBuf::from(":memory:"))
    }

    fn init(conn: Connection, path: PathBuf) -> Result<Self, String> {
        let fail = |e: rusqlite::Error| open_error(&path, &e.to_string());
        conn.busy_timeout(Duration::ZERO).map_err(fail)?;
        // Exclusive: the lock taken by the first write below is kept until the server exits.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(fail)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(fail)?;
        if version > SCHEMA_VERSION {
            return Err(format!(
                "The room database {} was written by a newer version of the server (schema \
                 {version}, this one knows {SCHEMA_VERSION}). Use a newer server or another \
                 --data-dir.",
                path.display()
            ));
        }
        // A write transaction: fails now, not later, on a read-only file or one in use.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))
        .map_err(fail)?;
        Ok(Self {
            conn,
            path,
            errors: 0,
            last_error_log: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write errors since start.
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Runs one cached statement that changes rows of room `id`: `?1` and `?2` are the room's
    /// name and key column, `row` binds `?3` on. A failure is reported (see [`Self::report`])
    /// and the rooms go on in memory.
    fn write(&mut self, what: &str, sql: &str, id: &RoomId, row: &[&dyn ToSql]) {
        let key = key_blob(id);
        let mut params: Vec<&dyn ToSql> = vec![&id.name, &key];
        params.extend_from_slice(row);
        let result = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params.as_slice()))
            .map(drop);
        self.report(what, result);
    }

    /// Saves one row of `table` for room `id`, inserted or, if a row with the same room and
    /// `row_key` columns exists, updated with `values` (see [`upsert_sql`]).
    fn save(
        &mut self,
        what: &str,
        table: &str,
        id: &RoomId,
        row_key: &[(&str, &dyn ToSql)],
        values: &[(&str, &dyn ToSql)],
    ) {
        fn names<'a>(columns: &[(&'a str, &dyn ToSql)]) -> Vec<&'a str> {
            columns.iter().map(|(c, _)| *c).collect()
        }
        let sql = upsert_sql(table, &names(row_key), &names(values));
        let row: Vec<&dyn ToSql> = row_key.iter().chain(values).map(|(_, v)| *v).collect();
        self.write(what, &sql, id, &row);
    }

    fn report(&mut self, what: &str, result: rusqlite::Result<()>) {
        let Err(e) = result else { return };
        self.errors += 1;
        let now = Instant::now();
        if self
            .last_error_log
            .is_none_or(|t| now.duration_since(t) >= ERROR_LOG_INTERVAL)
        {
            self.last_error_log = Some(now);
            tracing::warn!(
                "room database {}: cannot {what}: {e} ({} write errors so far; rooms go on \
                 in memory)",
                self.path.display(),
                self.errors
            );
        }
    }

    /// Every row `sql` selects, each read as the tuple `T` of its columns.
    fn select<T>(&self, sql: &str) -> rusqlite::Result<Vec<T>>
    where
        T: for<'a> TryFrom<&'a rusqlite::Row<'a>, Error = rusqlite::Error>,
    {
        let mut stmt = self.conn.prepare(sql)?;
        let rows = stmt.query_map([], |r| T::try_from(r))?;
        rows.collect()
    }

    fn try_load(&mut self) -> rusqlite::Result<Vec<StoredRoom>> {
        let mut rooms = Vec::new();
        let mut skipped = 0u64;
        let room_rows: Vec<RoomRow> = self.select(
            "SELECT name, key, password, owner, locked, empty_since FROM rooms ORDER BY name",
        )?;
        for (name, key, password, owner, locked, empty_since) in room_rows {
            let (Some(id), Some(owner)) = (id_from_row(name, &key), digest_from(&owner)) else {
                skipped += 1;
                continue;
            };
            rooms.push(StoredRoom {
                id,
                room: RoomRecord {
                    password,
                    owner,
                    locked,
                    empty_since: empty_since.map(|t| t.max(0) as u64),
                },
                members: Vec::new(),
                bans: Vec::new(),
            });
        }
        let index: std::collections::HashMap<RoomId, usize> = rooms
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        let member_rows: Vec<MemberRow> =
            self.select("SELECT name, key, peer, token, owner, away_since FROM members")?;
        for (name, key, peer, token, owner, away_since) in member_rows {
            let room = id_from_row(name, &key).and_then(|id| index.get(&id).copied());
            match (room, digest_from(&token)) {
                (Some(i), Some(token)) if crate::protocol::is_hex_id(&peer) => {
                    rooms[i].members.push(MemberRecord {
                        peer,
                        token,
                        owner,
                        away_since: away_since.map(|t| t.max(0) as u64),
                    })
                }
                _ => skipped += 1,
            }
        }
        let ban_rows: Vec<(String, Vec<u8>, Vec<u8>, i64)> =
            self.select("SELECT name, key, token, until FROM bans")?;
        for (name, key, token, until) in ban_rows {
            let room = id_from_row(name, &key).and_then(|id| index.get(&id).copied());
            match (room, digest_from(&token)) {
                (Some(i), Some(token)) => rooms[i].bans.push(BanRecord {
                    token,
                    until: until.max(0) as u64,
                }),
                _ => skipped += 1,
            }
        }
        if skipped > 0 {
            tracing::warn!(
                "room database {}: skipped {skipped} malformed rows",
                self.path.display()
            );
        }
        Ok(rooms)
    }
}

fn open_error(path: &Path, e: &str) -> String {
    let hint = if e.contains("locked") || e.contains("busy") {
        " Is another Tutti server using this --data-dir?"
    } else if e.contains("not a database") || e.contains("malformed") {
        " The file is damaged: move it away (rooms start empty) or restore a backup."
    } else if e.contains("readonly") || e.contains("read-only") || e.contains("unable to open") {
        " Make it writable, choose another --data-dir, or run with --no-persist."
    } else {
        ""
    };
    format!(
        "Cannot use the room database {}: {e}.{hint}",
        path.display()
    )
}

/// The statement that saves a row of `table`, whose primary key is a room's name and key and
/// the `row_key` columns: inserted with `row_key` and `values` (bound from `?3` on, in that
/// order), or the `values` updated if the row exists.
fn upsert_sql(table: &str, row_key: &[&str], values: &[&str]) -> String {
    let columns: Vec<&str> = row_key.iter().chain(values).copied().collect();
    let holes: Vec<String> = (0..columns.len()).map(|i| format!("?{}", i + 3)).collect();
    let conflict: String = row_key.iter().map(|c| format!(", {c}")).collect();
    let updates: Vec<String> = (values.iter().enumerate())
        .map(|(i, c)| format!("{c} = ?{}", i + 3 + row_key.len()))
        .collect();
    format!(
        "INSERT INTO {table} (name, key, {}) VALUES (?1, ?2, {}) \
         ON CONFLICT (name, key{conflict}) DO UPDATE SET {}",
        columns.join(", "),
        holes.join(", "),
        updates.join(", ")
    )
}

/// A row of `rooms` as read: name, key, password, owner, locked, empty_since.
type RoomRow = (String, Vec<u8>, Option<String>, Vec<u8>, bool, Option<i64>);

/// A row of `members` as read: name, key, peer, token, owner, away_since.
type MemberRow = (String, Vec<u8>, String, Vec<u8>, bool, Option<i64>);

/// The key column: the key's digest, or empty for a public room.
fn key_blob(id: &RoomId) -> &[u8] {
    id.key.as_ref().map_or(&[][..], |k| &k[..])
}

fn id_from_row(name: String, key: &[u8]) -> Option<RoomId> {
    let key = match key.len() {
        0 => None,
        _ => Some(digest_from(key)?),
    };
    crate::protocol::validate_room(&name).ok()?;
    Some(RoomId { name, key })
}

fn digest_from(bytes: &[u8]) -> Option<Digest32> {
    bytes.try_into().ok()
}

fn ms(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

impl Store for SqliteStore {
    fn load(&mut self) -> Result<Vec<StoredRoom>, String> {
        self.try_load()
            .map_err(|e| open_error(&self.path, &e.to_string()))
    }

    fn put_room(&mut self, id: &RoomId, room: &RoomRecord) {
        self.save(
            "save a room",
            "rooms",
            id,
            &[],
            &[
                ("password", &room.password),
                ("owner", &room.owner),
                ("locked", &room.locked),
                ("empty_since", &room.empty_since.map(ms)),
            ],
        );
    }

    fn delete_room(&mut self, id: &RoomId) {
        let key = key_blob(id);
        let result = self.conn.unchecked_transaction().and_then(|tx| {
            for table in ["members", "bans", "rooms"] {
                tx.prepare_cached(&format!("DELETE FROM {table} WHERE name = ?1 AND key = ?2"))?
                    .execute(params![id.name, key])?;
            }
            tx.commit()
        });
        self.report("delete a room", result);
    }

    fn put_member(&mut self, id: &RoomId, member: &MemberRecord) {
        self.save(
            "save a member",
            "members",
            id,
            &[("peer", &member.peer)],
            &[
                ("token", &member.token),
                ("owner", &member.owner),
                ("away_since", &member.away_since.map(ms)),
            ],
        );
    }

    fn delete_member(&mut self, id: &RoomId, peer: &str) {
        self.write(
            "delete a member",
            "DELETE FROM members WHERE name = ?1 AND key = ?2 AND peer = ?3",
            id,
            &[&peer],
        );
    }

    fn put_ban(&mut self, id: &RoomId, ban: &BanRecord) {
        self.save(
            "save a ban",
            "bans",
            id,
            &[("token", &ban.token)],
            &[("until", &ms(ban.until))],
        );
    }

    fn delete_ban(&mut self, id: &RoomId, token: &Digest32) {
        self.write(
            "delete a ban",
            "DELETE FROM bans WHERE name = ?1 AND key = ?2 AND token = ?3",
            id,
            &[token],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upserts_bind_the_row_after_the_room() {
        assert_eq!(
            upsert_sql("members", &["peer"], &["token", "owner", "away_since"]),
            "INSERT INTO members (name, key, peer, token, owner, away_since) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name, key, peer) \
             DO UPDATE SET token = ?4, owner = ?5, away_since = ?6"
        );
        assert_eq!(
            upsert_sql("rooms", &[], &["password", "locked"]),
            "INSERT INTO rooms (name, key, password, locked) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (name, key) DO UPDATE SET password = ?3, locked = ?4"
        );
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tutti-store-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn id(name: &str, key: Option<u8>) -> RoomId {
        RoomId {
            name: name.into(),
            key: key.map(|k| [k; 32]),
        }
    }

    fn sample(store: &mut dyn Store) {
        let jam = id("jam", None);
        let private = id("jam", Some(7));
        store.put_room(
            &jam,
            &RoomRecord {
                password: Some("$argon2id$x".into()),
                owner: [1; 32],
                locked: false,
                empty_since: None,
            },
        );
        store.put_room(
            &private,
            &RoomRecord {
                password: None,
                owner: [2; 32],
                locked: true,
                empty_since: Some(1_700_000_000_000),
            },
        );
        store.put_member(
            &jam,
            &MemberRecord {
                peer: "a".repeat(32),
                token: [3; 32],
                owner: true,
                away_since: None,
            },
        );
        store.put_member(
            &private,
            &MemberRecord {
                peer: "b".repeat(32),
                token: [4; 32],
                owner: false,
                away_since: Some(5),
            },
        );
        store.put_ban(
            &private,
            &BanRecord {
                token: [5; 32],
                until: 99,
            },
        );
    }

    #[test]
    fn keeps_rooms_members_and_bans_across_reopening() {
        let dir = temp_dir("reopen");
        {
            let mut store = SqliteStore::open(&dir).expect("opens a new directory");
            sample(&mut store);
            // Updates replace; deletes remove.
            store.put_member(
                &id("jam", None),
                &MemberRecord {
                    peer: "a".repeat(32),
                    token: [3; 32],
                    owner: true,
                    away_since: Some(42),
                },
            );
            store.put_member(
                &id("jam", None),
                &MemberRecord {
                    peer: "c".repeat(32),
                    token: [6; 32],
                    owner: false,
                    away_since: None,
                },
            );
            store.delete_member(&id("jam", None), &"c".repeat(32));
            assert_eq!(store.errors(), 0);
        }
        let mut store = SqliteStore::open(&dir).expect("reopens");
        let rooms = store.load().expect("loads");
        assert_eq!(rooms.len(), 2);
        let jam = rooms.iter().find(|r| r.id == id("jam", None)).expect("jam");
        assert_eq!(jam.room.password.as_deref(), Some("$argon2id$x"));
        assert_eq!(
            jam.members,
            vec![MemberRecord {
                peer: "a".repeat(32),
                token: [3; 32],
                owner: true,
                away_since: Some(42)
            }]
        );
        let private = rooms
            .iter()
            .find(|r| r.id == id("jam", Some(7)))
            .expect("the private room is another room");
        assert!(private.room.locked);
        assert_eq!(private.room.empty_since, Some(1_700_000_000_000));
        assert_eq!(
            private.bans,
            vec![BanRecord {
                token: [5; 32],
                until: 99
            }]
        );
        store.delete_room(&id("jam", Some(7)));
        store.delete_ban(&id("jam", Some(7)), &[5; 32]);
        let rooms = store.load().expect("loads");
        assert_eq!(rooms.len(), 1);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_server_on_the_same_directory_is_refused() {
        let dir = temp_dir("twice");
        let first = SqliteStore::open(&dir).expect("first opens");
        let second = SqliteStore::open(&dir).err().expect("second is refused");
        assert!(second.contains("another Tutti server"), "{second}");
        drop(first);
        assert!(
            SqliteStore::open(&dir).is_ok(),
            "free again once the first is gone"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_file_is_a_clear_error() {
        let dir = temp_dir("damaged");
        std::fs::create_dir_all(&dir).expect("test dir");
        std::fs::write(dir.join(DB_FILE), vec![0x5a; 8192]).expect("write junk");
        let e = SqliteStore::open(&dir).err().expect("junk is refused");
        assert!(e.contains("not a database") && e.contains("damaged"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_a_clear_error() {
        let dir = temp_dir("file");
        std::fs::create_dir_all(dir.parent().expect("temp has a parent")).expect("temp");
        std::fs::write(&dir, "a file, not a directory").expect("write file");
        let e = SqliteStore::open(&dir.join("sub")).err().expect("refused");
        assert!(
            e.contains("--data-dir") && e.contains("--no-persist"),
            "{e}"
        );
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn malformed_rows_are_skipped() {
        let mut store = SqliteStore::open_in_memory().expect("memory");
        sample(&mut store);
        store
            .conn
            .execute_batch(
                "INSERT INTO rooms VALUES ('bad room', x'', NULL, x'00', 0, NULL);
                 INSERT INTO rooms VALUES ('short-owner', x'', NULL, x'0102', 0, NULL);
                 INSERT INTO members VALUES ('jam', x'', 'not-a-peer', zeroblob(32), 0, NULL);
                 INSERT INTO members VALUES ('nowhere', x'', 'not-a-peer', zeroblob(32), 0, NULL);",
            )
            .expect("insert junk");
        let rooms = store.load().expect("loads the rest");
        assert_eq!(rooms.len(), 2);
        assert_eq!(rooms.iter().map(|r| r.members.len()).sum::<usize>(), 2);
    }
}
