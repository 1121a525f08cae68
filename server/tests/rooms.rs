//! Room rules against a real server on loopback: password guessing held to the limiter's rate
//! and logged, returning members never held, rooms kept across their last member leaving and a
//! restart, `no-password`, private keys, lock and remove, and display names that deceive.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::{assert_fields, hex_id, join_msg, BinaryServer, Client, TempDist, TestServer};
use serde_json::json;

const KEY: &str = "Zq4mR7tW2xY9bC3dF6gH8jK1";

/// 32 hex chars from a number (distinct peer ids and tokens for many clients).
fn hex_n(n: u64, salt: u64) -> String {
    format!("{:016x}{:016x}", n, salt)
}

/// How many attempts the limiter lets through for one address that never stops guessing over
/// `window`: `free` at once, then one after each delay (backoff doubling up to max).
fn scheduled(free: u32, backoff: Duration, max: Duration, window: Duration) -> u32 {
    let (mut count, mut at, mut delay) = (free, Duration::ZERO, backoff);
    loop {
        at += delay;
        if at > window {
            return count;
        }
        count += 1;
        delay = (delay * 2).min(max);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_guessing_from_200_connections_is_held_to_the_rate_and_logged() {
    const CONNECTIONS: u64 = 200;
    const FREE: u32 = 5;
    // The defaults (20 s doubling to 5 min) scaled down 100 times.
    const BACKOFF: Duration = Duration::from_millis(200);
    const MAX: Duration = Duration::from_millis(3000);
    const SCALE: f64 = 100.0;
    // Ends between two allowed attempts (the 11th at 9 s, the 12th due at 12 s), so timing
    // jitter cannot change the count.
    const WINDOW: Duration = Duration::from_millis(10_500);
    const PAUSE: Duration = Duration::from_millis(200);

    let dist = TempDist::new();
    let server = BinaryServer::start_on(
        &dist.dist,
        &dist.base.join("data"),
        &[
            "--password-free-failures",
            "5",
            "--password-backoff-ms",
            "200",
            "--password-backoff-max-ms",
            "3000",
            // The connection limits would refuse most of the 200 sockets and the join deadline
            // would close them mid-window: lifted here, so the password limiter alone is
            // measured (the abuse tests measure those limits).
            "--max-connections-per-address",
            "512",
            "--connect-burst",
            "512",
            "--join-timeout-ms",
            "60000",
        ],
    );
    let home = Ipv4Addr::new(127, 0, 0, 1);
    let password = json!({"password": "correct horse battery staple"});
    let mut owner = Client::connect_from(home, server.addr).await;
    let m_peer = hex_id('a');
    let w = owner
        .join_with("vault", "Maya", 'a', '1', password.clone())
        .await;
    assert_fields(&w, json!({"type": "welcome", "isOwner": true}));
    let mut friend = Client::connect_from(home, server.addr).await;
    let w = friend
        .join_with("vault", "Noor", 'b', '2', password.clone())
        .await;
    assert_eq!(w["type"], "welcome", "{w}");
    assert_eq!(owner.recv().await["type"], "peer-joined");

    let started = Instant::now();
    let deadline = started + WINDOW;
    let mut guessers = Vec::new();
    for n in 0..CONNECTIONS {
        let addr = server.addr;
        guessers.push(tokio::spawn(async move {
            let mut c = Client::connect_from(home, addr).await;
            let (peer, token) = (hex_n(n, 0xfeed), hex_n(n, 0xbeef));
            let (mut sent, mut wrong, mut limited, mut max_retry) = (0u32, 0u32, 0u32, 0u64);
            let mut guess = 0u32;
            while Instant::now() < deadline && sent < 1000 {
                guess += 1;
                let pw = json!({"password": format!("guess-{n}-{guess}")});
                c.send(join_msg("vault", "Eve", &peer, &token, pw)).await;
                sent += 1;
                let reply = c.recv_within(Duration::from_secs(10)).await;
                match reply["code"].as_str() {
                    Some("wrong-password") => wrong += 1,
                    Some("too-many-attempts") => {
                        limited += 1;
                        max_retry = max_retry.max(reply["retryAfterMs"].as_u64().unwrap_or(0));
                    }
                    _ => panic!("unexpected reply to a guess: {reply}"),
                }
                tokio::time::sleep(PAUSE).await;
            }
            (sent, wrong, limited, max_retry)
        }));
    }

    // Meanwhile: Maya's connection drops and she comes back with her token, and someone on
    // another address joins with the right password. Neither is held by the guessing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    drop(owner);
    let left = friend.recv_within(Duration::from_secs(5)).await;
    assert_eq!(
        left,
        json!({"type": "peer-left", "peer": m_peer, "reason": "closed"})
    );
    let back_at = Instant::now();
    let mut owner = Client::connect_from(home, server.addr).await;
    let w = owner
        .join_with("vault", "Maya", 'a', '1', password.clone())
        .await;
    let back_ms = back_at.elapsed().as_millis();
    assert_fields(&w, json!({"type": "welcome", "isOwner": true}));
    let mut neighbour = Client::connect_from(Ipv4Addr::new(127, 0, 0, 2), server.addr).await;
    let w = neighbour
        .join_with("vault", "Ravi", 'c', '3', password.clone())
        .await;
    assert_eq!(w["type"], "welcome", "another address is not held: {w}");

    let (mut sent, mut wrong, mut limited, mut max_retry) = (0u32, 0u32, 0u32, 0u64);
    for g in guessers {
        let (s, w, l, r) = g.await.expect("a guesser");
        sent += s;
        wrong += w;
        limited += l;
        max_retry = max_retry.max(r);
    }
    let elapsed = started.elapsed();
    let expected = scheduled(FREE, BACKOFF, MAX, WINDOW);
    let per_minute = f64::from(wrong) / elapsed.as_secs_f64() * 60.0;
    println!(
        "guessing: {CONNECTIONS} connections from 127.0.0.1 for {:.1} s: {sent} attempts, \
         {wrong} reached the password hash, {limited} answered too-many-attempts (longest \
         retryAfterMs {max_retry}); {per_minute:.1} guesses/min over the window (schedule: \
         {expected}); at the default flags (x{SCALE}) the same {wrong} guesses take {:.1} min, \
         {:.2} guesses/min",
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * SCALE / 60.0,
        per_minute / SCALE
    );
    println!("guessing: Maya came back with her token in {back_ms} ms meanwhile");
    assert_eq!(wrong, expected, "failures that reached the hash");
    assert_eq!(sent, wrong + limited);
    assert!(limited > 1000, "{limited}");
    assert!(max_retry <= MAX.as_millis() as u64, "{max_retry}");

    // Every failure is in the log with the address and the room, no password is.
    let mut lines = Vec::new();
    let mut counted = 0u64;
    let settle = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settle {
        lines = server.log();
        counted = lines
            .iter()
            .filter(|l| l.contains("password wrong room=vault addr=127.0.0.1"))
            .map(|l| 1 + held_back(l))
            .sum();
        if counted >= u64::from(wrong) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused_lines = lines
        .iter()
        .filter(|l| l.contains("password refused room=vault addr=127.0.0.1 limit=address"))
        .count();
    println!(
        "guessing: {counted} failures logged with address and room ({refused_lines} lines for \
         the {limited} refusals)"
    );
    assert_eq!(counted, u64::from(wrong));
    assert!(refused_lines >= 1);
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("guess-") || l.contains("correct horse")),
        "a password reached the log"
    );
    drop(neighbour);
    assert_eq!(server.stop().await.0, Some(0));
}

#[tokio::test]
async fn a_room_guessed_from_many_addresses_holds_new_addresses_not_members() {
    // 5 free failures per address, so 20 for the room from all addresses together.
    let server = TestServer::start(|c| {
        c.password_backoff_ms = 30_000;
        c.password_backoff_max_ms = 60_000;
    })
    .await;
    let password = json!({"password": "Dorian mode"});
    let mut owner = server.ws().await;
    let w = owner
        .join_with("studio", "Ola", 'a', '1', password.clone())
        .await;
    assert_eq!(w["type"], "welcome");
    // A friend on 127.0.2.1 got in before the guessing started.
    let friend_addr = Ipv4Addr::new(127, 0, 2, 1);
    let mut friend = Client::connect_from(friend_addr, server.addr).await;
    let w = friend
        .join_with("studio", "Fin", 'b', '2', password.clone())
        .await;
    assert_eq!(w["type"], "welcome");
    friend.send(json!({"type": "leave"})).await;
    // 40 addresses, one guess each.
    let (mut reached, mut held) = (0, 0);
    for i in 0..40u8 {
        let mut c = Client::connect_from(Ipv4Addr::new(127, 0, 1, i + 1), server.addr).await;
        let peer = hex_n(u64::from(i), 7);
        let guess = json!({"password": format!("guess {i}")});
        let reply = c.ask(join_msg("studio", "Eve", &peer, &peer, guess)).await;
        match reply["code"].as_str() {
            Some("wrong-password") => reached += 1,
            Some("too-many-attempts") => held += 1,
            _ => panic!("unexpected reply {reply}"),
        }
    }
    println!(
        "room-wide: 40 addresses guessing once each: {reached} reached the hash, {held} held \
         by the room's limit"
    );
    assert_eq!((reached, held), (20, 20));
    // A new address with the right password is held too; the friend's address is not.
    let mut newcomer = Client::connect_from(Ipv4Addr::new(127, 0, 3, 1), server.addr).await;
    let reply = newcomer
        .join_with("studio", "New", 'c', '3', password.clone())
        .await;
    assert_eq!(reply["code"], "too-many-attempts", "{reply}");
    assert!(
        reply["retryAfterMs"].as_u64().is_some_and(|ms| ms > 20_000),
        "{reply}"
    );
    let mut friend = Client::connect_from(friend_addr, server.addr).await;
    let w = friend
        .join_with("studio", "Fin", 'd', '4', password.clone())
        .await;
    assert_eq!(w["type"], "welcome", "{w}");
}

/// The N of "(N similar lines held back)" at the end of a log line, else 0.
fn held_back(line: &str) -> u64 {
    line.rsplit_once(" (")
        .and_then(|(_, tail)| tail.strip_suffix(" similar lines held back)"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_password_room_survives_its_last_member_and_a_restart() {
    let dist = TempDist::new();
    let data = dist.base.join("data");
    let password = "Rainy-Tuesday-2026";
    let with_pw = json!({"password": password});

    let server = BinaryServer::start_on(&dist.dist, &data, &[]);
    let mut a = Client::connect(server.addr).await;
    let w = a.join_with("band", "Ana", 'a', '1', with_pw.clone()).await;
    let secret = w["owner"]
        .as_str()
        .expect("the creator's owner secret")
        .to_owned();
    assert_fields(&w, json!({"protected": true, "locked": false}));
    // A private room too, to look for its key on disk.
    let mut p = Client::connect(server.addr).await;
    let private = json!({"key": KEY, "password": password});
    let w = p.join_with("band", "Pia", 'd', '4', private).await;
    assert_fields(&w, json!({"isOwner": true, "peers": []}));
    p.send(json!({"type": "leave"})).await;
    // The last member goes: the room is kept.
    drop(a);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut x = Client::connect(server.addr).await;
    let e = x.join_with("band", "Xi", 'e', '5', json!({})).await;
    assert_eq!(
        e["code"], "wrong-password",
        "re-created without the password: {e}"
    );
    let w = x.join_with("band", "Xi", 'e', '5', with_pw.clone()).await;
    assert_fields(&w, json!({"type": "welcome", "isOwner": false}));
    x.send(json!({"type": "leave"})).await;
    x.send(json!({"type": "ping"})).await;
    assert_eq!(x.recv().await["type"], "pong");
    assert_eq!(server.stop().await.0, Some(0));

    // Nothing secret is on disk in clear.
    let mut disk = Vec::new();
    for entry in std::fs::read_dir(&data).expect("the data directory") {
        disk.extend(std::fs::read(entry.expect("an entry").path()).expect("a file"));
    }
    assert!(disk.len() > 4096, "{} bytes on disk", disk.len());
    for secret in [password, KEY, &hex_id('1'), &secret, &hex_id('4')] {
        assert!(
            !disk.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{secret} is on disk in clear"
        );
    }
    println!(
        "restart: {} bytes of room database, no secret in clear",
        disk.len()
    );

    let started = Instant::now();
    let server = BinaryServer::start_on(&dist.dist, &data, &[]);
    println!(
        "restart: the server was back in {} ms",
        started.elapsed().as_millis()
    );
    assert!(server.logs_within("rooms: 2 kept"), "{:?}", server.log());
    let mut y = Client::connect(server.addr).await;
    for extra in [json!({}), json!({"password": "rainy-tuesday-2026"})] {
        let e = y.join_with("band", "Yu", 'f', '6', extra).await;
        assert_eq!(e["code"], "wrong-password", "{e}");
    }
    // Ana's peer id is still hers: another token cannot take it, even with the password.
    let taken = y.join_with("band", "Yu", 'a', '6', with_pw.clone()).await;
    assert_eq!(taken["code"], "peer-id-taken", "{taken}");
    let w = y.join_with("band", "Yu", 'f', '6', with_pw.clone()).await;
    assert_fields(&w, json!({"protected": true, "isOwner": false}));
    // Ana comes back with her token, and her owner secret makes her the owner.
    let mut a = Client::connect(server.addr).await;
    let owner = json!({"password": password, "owner": secret});
    let w = a.join_with("band", "Ana", 'a', '1', owner).await;
    assert_fields(&w, json!({"isOwner": true, "owner": secret}));
    assert_eq!(
        w["peers"],
        json!([{"peer": hex_id('f'), "name": "Yu", "stream": 2}])
    );
    assert_eq!(server.stop().await.0, Some(0));
}

#[tokio::test]
async fn a_password_for_an_open_room_is_refused() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    let mut b = server.ws().await;
    let w = a.join("open", "A", 'a', '1', None).await;
    assert_fields(&w, json!({"protected": false, "isOwner": true}));
    let e = b.join("open", "B", 'b', '2', Some("hunter2")).await;
    assert_eq!(e["code"], "no-password");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("no password")),
        "{e}"
    );
    assert_eq!(b.join("open", "B", 'b', '2', None).await["type"], "welcome");
}

#[tokio::test]
async fn a_private_room_cannot_be_found_without_its_key() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    let private = |pw: &str| json!({"key": KEY, "password": pw});
    let w = a.join_with("jam", "Ana", 'a', '1', private("pw")).await;
    assert_eq!(w["type"], "welcome");
    // Without the key, or with another: an empty open room of the same name.
    let mut b = server.ws().await;
    let w = b.join("jam", "Bo", 'b', '2', None).await;
    assert_fields(
        &w,
        json!({"peers": [], "protected": false, "isOwner": true}),
    );
    let mut c = server.ws().await;
    let other_key = json!({"key": format!("{}Q", &KEY[..KEY.len() - 1])});
    let w = c.join_with("jam", "Cy", 'c', '3', other_key).await;
    assert_fields(&w, json!({"peers": [], "protected": false}));
    // With the key: its password, then its members.
    let mut d = server.ws().await;
    let wrong = d.join_with("jam", "Di", 'd', '4', private("nope")).await;
    assert_eq!(wrong["code"], "wrong-password");
    let w = d.join_with("jam", "Di", 'd', '4', private("pw")).await;
    assert_eq!(
        w["peers"],
        json!([{"peer": hex_id('a'), "name": "Ana", "stream": 1}])
    );
    // The public room heard nothing of it.
    b.send(json!({"type": "ping", "t": 1})).await;
    assert_eq!(b.recv().await["type"], "pong");
}

#[tokio::test]
async fn the_owner_locks_and_removes_others_cannot() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    let mut b = server.ws().await;
    let mut c = server.ws().await;
    assert_eq!(a.join("r", "A", 'a', '1', None).await["isOwner"], true);
    assert_eq!(b.join("r", "B", 'b', '2', None).await["isOwner"], false);
    c.join("r", "C", 'c', '3', None).await;
    a.recv().await;
    a.recv().await;
    b.recv().await;

    b.send(json!({"type": "lock", "locked": true})).await;
    assert_eq!(b.recv().await["code"], "not-owner");
    b.send(json!({"type": "remove", "peer": hex_id('c')})).await;
    assert_eq!(b.recv().await["code"], "not-owner");
    let mut lone = server.ws().await;
    lone.send(json!({"type": "lock", "locked": true})).await;
    assert_eq!(lone.recv().await["code"], "not-joined");

    a.send(json!({"type": "lock", "locked": true})).await;
    for m in [&mut a, &mut b, &mut c] {
        assert_eq!(m.recv().await, json!({"type": "room", "locked": true}));
    }
    let mut d = server.ws().await;
    assert_eq!(
        d.join("r", "D", 'd', '4', None).await["code"],
        "room-locked"
    );
    // c's connection drops; c comes back with its token through the lock.
    drop(c);
    for m in [&mut a, &mut b] {
        assert_eq!(m.recv().await["reason"], "closed");
    }
    let mut c = server.ws().await;
    let w = c.join("r", "C", 'c', '3', None).await;
    assert_fields(&w, json!({"type": "welcome", "locked": true}));
    a.recv().await;
    b.recv().await;

    // Removing b: b hears `removed` and a 4001 close, the others `peer-left` (removed).
    a.send(json!({"type": "remove", "peer": hex_id('b')})).await;
    let (code, texts) = b.closed().await;
    assert_eq!(code, Some(4001));
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert_eq!(texts[0]["code"], "removed");
    for m in [&mut a, &mut c] {
        assert_eq!(
            m.recv().await,
            json!({"type": "peer-left", "peer": hex_id('b'), "reason": "removed"})
        );
    }
    a.send(json!({"type": "remove", "peer": hex_id('b')})).await;
    assert_eq!(a.recv().await["code"], "unknown-peer");
    // b's token is refused even with the room open again.
    a.send(json!({"type": "lock", "locked": false})).await;
    assert_eq!(a.recv().await["locked"], false);
    let mut b = server.ws().await;
    assert_eq!(b.join("r", "B", 'b', '2', None).await["code"], "removed");
    let (code, _) = b.closed().await;
    assert_eq!(code, Some(4001));
    assert_eq!(d.join("r", "D", 'd', '4', None).await["type"], "welcome");
}

#[tokio::test]
async fn display_names_that_deceive_are_rejected() {
    let server = TestServer::start(|_| {}).await;
    let mut a = server.ws().await;
    for (name, code) in [
        ("Ana\u{202E}nimda", "bad-name"),
        ("\u{2067}Bo\u{2069}", "bad-name"),
        ("\u{200B}\u{200D}", "bad-name"),
        ("\u{3164}", "bad-name"),
        ("\u{2800} \u{FEFF}", "bad-name"),
        ("A\u{7}", "bad-name"),
        ("", "bad-name"),
    ] {
        let reply = a.join("r", name, 'a', '1', None).await;
        assert_eq!(reply["code"], code, "{name:?}: {reply}");
    }
    let w = a.join("r", " Zoë 👩\u{200D}🎤 ", 'a', '1', None).await;
    assert_eq!(w["type"], "welcome");
    let mut b = server.ws().await;
    let w = b.join("r", "B", 'b', '2', None).await;
    assert_eq!(
        w["peers"],
        json!([{"peer": hex_id('a'), "name": "Zoë 👩\u{200D}🎤", "stream": 1}])
    );
}
