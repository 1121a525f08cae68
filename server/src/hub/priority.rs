//! Real-time scheduling for the hub's worker threads.
//!
//! A worker mixes every 2.67 ms and forwards each block as it comes; on a machine that is also
//! busy with other work, a thread at normal priority waits behind it and every listener hears the
//! wait as a gap. Audio servers (JACK, JackTrip's hub) ask the system for a fixed-priority
//! real-time policy for their audio threads, and so does the hub: `SCHED_FIFO` at
//! `--hub-priority` (JACK's default is 10; 0 keeps normal scheduling). The kernel's real-time
//! throttling still leaves other threads a share of each second, and a worker sleeps in its poll
//! whenever nothing is due, so a real-time worker takes only the time its rooms need.
//!
//! Asking can be refused (no `CAP_SYS_NICE` and no `RLIMIT_RTPRIO`, or a system without the
//! policy): the worker then runs at normal priority and says so once in the log, with the
//! system's reason. The `thread-priority` crate makes the call; nothing here is per packet.

/// The outcome of asking for real-time scheduling, for the log and the stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheduling {
    /// Normal scheduling, as configured (`--hub-priority 0`).
    Normal,
    /// `SCHED_FIFO` at this priority.
    Realtime(u8),
    /// Asked for real-time scheduling at this priority and was refused; the text says why.
    Refused(u8, String),
}

/// Asks for `SCHED_FIFO` at `priority` (1..=99) for the calling thread; 0 asks nothing.
pub fn promote_current(priority: u8) -> Scheduling {
    if priority == 0 {
        return Scheduling::Normal;
    }
    match set(priority) {
        Ok(()) => Scheduling::Realtime(priority),
        Err(why) => Scheduling::Refused(priority, why),
    }
}

#[cfg(unix)]
fn set(priority: u8) -> Result<(), String> {
    use thread_priority::unix::{
        set_thread_priority_and_policy, thread_native_id, RealtimeThreadSchedulePolicy,
        ThreadSchedulePolicy,
    };
    use thread_priority::{ThreadPriority, ThreadPriorityValue};
    let value = ThreadPriorityValue::try_from(priority).map_err(|e| e.to_string())?;
    set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Crossplatform(value),
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| reason(&e, priority))
}

/// The system's refusal in words, with what would grant it.
#[cfg(unix)]
fn reason(e: &thread_priority::Error, priority: u8) -> String {
    match e {
        thread_priority::Error::OS(code) => {
            let io = std::io::Error::from_raw_os_error(*code);
            if matches!(io.kind(), std::io::ErrorKind::PermissionDenied) {
                format!(
                    "{io}: the server needs CAP_SYS_NICE or a real-time limit \
                     (RLIMIT_RTPRIO, `ulimit -r`) of at least {priority}"
                )
            } else {
                io.to_string()
            }
        }
        other => format!("{other:?}"),
    }
}

#[cfg(not(unix))]
fn set(_priority: u8) -> Result<(), String> {
    Err("real-time scheduling is asked for on Unix systems only".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_keeps_normal_scheduling() {
        assert_eq!(promote_current(0), Scheduling::Normal);
    }

    /// On a thread of its own (the test harness's threads are not touched): either the system
    /// grants the policy, and the thread then reports SCHED_FIFO at a real-time priority, or it
    /// refuses with a reason.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_granted_policy_is_the_one_the_thread_has() {
        let got = std::thread::spawn(|| {
            let outcome = promote_current(10);
            let policy = thread_priority::unix::thread_schedule_policy();
            (outcome, policy)
        })
        .join()
        .expect("thread");
        match got {
            (Scheduling::Realtime(10), Ok(policy)) => assert_eq!(
                policy,
                thread_priority::unix::ThreadSchedulePolicy::Realtime(
                    thread_priority::unix::RealtimeThreadSchedulePolicy::Fifo
                )
            ),
            (Scheduling::Refused(10, why), _) => assert!(!why.is_empty()),
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}
