//! The few system calls the run loop needs, each wrapped once: the netfilter netlink socket, a
//! signalfd for SIGTERM/SIGINT, `ppoll` with a nanosecond timeout, and the thread's timer slack.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Makes a call that returns a byte count, or −1 with `errno` set, again while a signal
/// interrupts it.
fn retry_interrupted(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = call();
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` outlives the call and its size is passed alongside.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn get_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of the sizes given.
    check(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

fn kernel_addr() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain data; all zeroes is a valid value (port 0 = the kernel).
    let mut addr: libc::sockaddr_nl = unsafe { zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr
}

/// A non-blocking NETLINK_NETFILTER socket.
pub struct NetlinkSocket {
    fd: OwnedFd,
}

impl NetlinkSocket {
    /// Opens and binds the socket, turns off ENOBUFS reports (a full receive buffer then drops
    /// silently instead of failing the next read) and asks for `rcvbuf` bytes of receive buffer
    /// (beyond the system limit when we may). Returns the socket and the buffer size granted.
    pub fn open(rcvbuf: usize) -> io::Result<(Self, usize)> {
        // SAFETY: plain socket(2) call; the descriptor is owned at once.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_NETFILTER,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let addr = kernel_addr();
        // SAFETY: `addr` is a valid sockaddr_nl of the size given.
        check(unsafe {
            libc::bind(
                raw,
                (&addr as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        })?;
        set_int_opt(raw, libc::SOL_NETLINK, libc::NETLINK_NO_ENOBUFS, 1)?;
        let want = libc::c_int::try_from(rcvbuf).unwrap_or(libc::c_int::MAX);
        if set_int_opt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, want).is_err() {
            set_int_opt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, want)?;
        }
        let granted = get_int_opt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        Ok((Self { fd }, granted.max(0) as usize))
    }

    /// Sends one datagram (one or more netlink messages) to the kernel.
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let addr = kernel_addr();
        retry_interrupted(|| {
            // SAFETY: `bytes` and `addr` are valid for the lengths given.
            unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    0,
                    (&addr as *const libc::sockaddr_nl).cast(),
                    size_of::<libc::sockaddr_nl>() as libc::socklen_t,
                )
            }
        })
        .map(drop)
    }

    /// Reads one datagram into `buf` without waiting. `Ok(None)`: nothing to read.
    /// A datagram longer than `buf` is an error (`EMSGSIZE`): with a small copy range it cannot
    /// happen.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let len = buf.len();
        let read = retry_interrupted(|| {
            // SAFETY: `buf` is valid for writes of its length.
            unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    len,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            }
        });
        match read {
            Ok(n) if n > len => Err(io::Error::from_raw_os_error(libc::EMSGSIZE)),
            Ok(n) => Ok(Some(n)),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(err) => Err(err),
        }
    }
}

impl AsRawFd for NetlinkSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// SIGTERM and SIGINT, blocked for the process and delivered through a descriptor the run loop
/// polls, so a stop request is handled between two verdicts, never inside one.
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks SIGTERM and SIGINT on this (the only) thread and opens the descriptor.
    pub fn term_and_int() -> io::Result<Self> {
        // SAFETY: sigset_t is initialised by sigemptyset before use; the calls only read it.
        unsafe {
            let mut set: libc::sigset_t = zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGINT);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            let raw = check(libc::signalfd(
                -1,
                &set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?;
            Ok(Self {
                fd: OwnedFd::from_raw_fd(raw),
            })
        }
    }

    /// The signal waiting, if any.
    pub fn take(&self) -> Option<i32> {
        // SAFETY: signalfd_siginfo is plain data; the read writes at most its size.
        let mut info: libc::signalfd_siginfo = unsafe { zeroed() };
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size_of::<libc::signalfd_siginfo>(),
            )
        };
        (n == size_of::<libc::signalfd_siginfo>() as isize).then_some(info.ssi_signo as i32)
    }
}

impl AsRawFd for SignalFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Which of the polled descriptors are ready.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ready {
    pub netlink: bool,
    pub signal: bool,
}

/// Waits until `netlink` or `signal` is readable, or `timeout_ns` has passed.
pub fn wait(netlink: RawFd, signal: RawFd, timeout_ns: u64) -> io::Result<Ready> {
    let mut fds = [
        libc::pollfd {
            fd: netlink,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: signal,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000).min(i32::MAX as u64) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `fds` and `ts` are valid for the call; no signal mask change.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() == io::ErrorKind::Interrupted {
            return Ok(Ready::default());
        }
        return Err(err);
    }
    let hit = |p: &libc::pollfd| p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0;
    Ok(Ready {
        netlink: hit(&fds[0]),
        signal: hit(&fds[1]),
    })
}

/// Real-time priority of `--realtime`: above ordinary processes, below the kernel's own
/// real-time threads (which use 50 and up).
pub const REALTIME_PRIORITY: libc::c_int = 10;

/// Runs this (single-threaded) process under SCHED_FIFO at [`REALTIME_PRIORITY`], so a busy
/// machine does not make verdicts late. The loop never spins, and the kernel's real-time
/// throttling (95 % of each second by default) still bounds it. Needs root.
pub fn set_realtime() -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: REALTIME_PRIORITY,
    };
    // SAFETY: `param` is valid for the call; pid 0 is this process.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}

/// Sets this thread's timer slack: the kernel may otherwise wake a timed wait up to 50 µs late.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and touches no memory.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(drop)
}
