//! The `scalwsd` binary as a child process, for tests that signal it.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

const BIN: &str = env!("CARGO_BIN_EXE_scalwsd");

/// A free address on 127.0.0.1 (bound then released; scalwsd binds it next).
pub fn free_addr() -> SocketAddr {
    free_addrs::<1>()[0]
}

/// `N` distinct free addresses (held together while chosen, so never the same twice).
pub fn free_addrs<const N: usize>() -> [SocketAddr; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap())
}

/// What a process holds and has spent.
#[derive(Clone, Copy, Debug)]
pub struct Usage {
    /// Resident memory, KiB (`VmRSS`).
    pub rss_kib: u64,
    /// User and system CPU time since it started.
    pub cpu: Duration,
}

impl Usage {
    /// Asserts that from `self` to `after` the process grew by less than
    /// `rss_mib` MiB and spent less than `cpu` of CPU time: bounds, not speed
    /// (a flood that leaks or spins blows far past them).
    pub fn assert_bounded(&self, after: Usage, rss_mib: u64, cpu: Duration, what: &str) {
        let grown = after.rss_kib.saturating_sub(self.rss_kib);
        let spent = after.cpu.saturating_sub(self.cpu);
        eprintln!(
            "{what}: RSS {} -> {} KiB (+{grown}), CPU {spent:?}",
            self.rss_kib, after.rss_kib
        );
        assert!(
            grown < rss_mib * 1024,
            "{what}: resident memory grew by {grown} KiB"
        );
        assert!(spent < cpu, "{what}: spent {spent:?} of CPU");
    }
}

/// A `scalwsd` process serving a file in its own tempdir, its stderr in
/// `stderr.log` there. Killed (SIGKILL) when dropped; a failing test prints
/// its logs.
pub struct Scalwsd {
    child: Child,
    dir: tempfile::TempDir,
    /// The configuration file it serves (rewrite it, then reload).
    pub config: PathBuf,
    /// The admin listener, if started with one.
    pub admin: Option<SocketAddr>,
}

impl Scalwsd {
    /// Writes `yaml` to `scalws.yaml` in `dir`, starts scalwsd on it and waits
    /// until the listener (and the admin listener, if any) accept connections.
    pub async fn start(
        dir: tempfile::TempDir,
        yaml: &str,
        http: SocketAddr,
        admin: Option<SocketAddr>,
        workers: u8,
    ) -> Self {
        let config = dir.path().join("scalws.yaml");
        std::fs::write(&config, yaml).unwrap();
        let stderr = File::create(dir.path().join("stderr.log")).unwrap();
        let child = Command::new(BIN)
            .arg("--workers")
            .arg(workers.to_string())
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut server = Self {
            child,
            dir,
            config,
            admin,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("scalwsd exited at start ({status}):\n{}", server.logs());
            }
            let mut ready = TcpStream::connect(http).await.is_ok();
            if let Some(admin) = admin {
                ready = ready && TcpStream::connect(admin).await.is_ok();
            }
            if ready {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "scalwsd did not start listening within 20 s:\n{}",
                server.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Starts scalwsd with `args` and `envs` in `dir`, and waits until every
    /// address in `ready` accepts connections.
    pub async fn spawn(
        dir: tempfile::TempDir,
        args: &[String],
        envs: &[(&str, String)],
        ready: &[SocketAddr],
    ) -> Self {
        let stderr = File::create(dir.path().join("stderr.log")).unwrap();
        let child = Command::new(BIN)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let config = dir.path().join("scalws.yaml");
        let mut server = Self {
            child,
            dir,
            config,
            admin: None,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("scalwsd exited at start ({status}):\n{}", server.logs());
            }
            let mut all = true;
            for addr in ready {
                all &= TcpStream::connect(addr).await.is_ok();
            }
            if all {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "scalwsd did not start listening within 30 s:\n{}",
                server.logs()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.path("stderr.log")).unwrap_or_default()
    }

    /// Sends `signal` (`TERM`, `USR1`, ...) with the `kill` command.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Its resident memory and CPU time now, from `/proc`.
    pub fn usage(&self) -> Usage {
        let pid = self.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let rss_kib = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status");
        // Fields after the command's closing parenthesis: state is the
        // third field of the line, utime the 14th, stime the 15th.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Usage {
            rss_kib,
            // USER_HZ is 100 on Linux.
            cpu: Duration::from_millis(ticks * 10),
        }
    }

    /// The exit status, if the process exits before `deadline`.
    pub async fn exit_before(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Scalwsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- scalwsd stderr ---\n{}", self.logs());
        }
    }
}
