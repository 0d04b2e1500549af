//! The `scalwsd` binary as a user runs it: exit codes, --check, serving, SIGTERM.
#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_scalwsd");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn check_reports_errors_with_positions_and_exits_2_without_binding() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        format!("listeners:\n  - name: http\n    address: 127.0.0.1:{port}\napplications:\n  - name: a\n    domains: [x.com]\n    listeners: [htp]\n"),
    )
    .unwrap();
    for args in [vec!["--check", "--config"], vec!["--config"]] {
        let output = Command::new(BIN).args(&args).arg(&file).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!(
            "{}:7:17: applications[0].listeners[0]: unknown listener \"htp\" (did you mean \"http\"?)",
            file.display()
        );
        assert!(stderr.contains(&expected), "{stderr}");
        // Nothing was bound: the port is still free.
        assert!(TcpListener::bind(("127.0.0.1", port)).is_ok());
    }
}

#[test]
fn check_accepts_a_valid_file_and_the_embedded_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ok.yaml");
    std::fs::write(
        &file,
        "listeners: [{ name: http, address: 127.0.0.1:0 }]\napplications:\n  - { name: a, domains: ['*'], routes: [{ path: /, respond: { body: hi } }] }\n",
    )
    .unwrap();
    let output = Command::new(BIN)
        .arg("--check")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{}: ok\n", file.display())
    );

    let output = Command::new(BIN)
        .arg("--check")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "<embedded default>: ok\n"
    );
}

#[test]
fn serves_then_drains_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(
        dir.path().join("scalws.yaml"),
        format!("listeners: [{{ name: http, address: 127.0.0.1:{port} }}]\napplications:\n  - {{ name: a, domains: ['*'], routes: [{{ path: /, respond: {{ body: from-file }} }}] }}\n"),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["--workers", "1"])
        .current_dir(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(mut stream) => {
                use std::io::Write;
                stream
                    .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut reply = String::new();
                stream.read_to_string(&mut reply).unwrap();
                break reply;
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(error) => panic!("scalwsd did not start: {error}"),
        }
    };
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("from-file"), "{reply}");

    // SIGHUP reloads the (unchanged) file: the proxy keeps serving.
    let status = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP must not stop scalwsd"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());

    assert_eq!(terminate(&mut child).code(), Some(0));
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(logs.contains("listening"), "{logs}");
    assert!(logs.contains(&format!("127.0.0.1:{port}")), "{logs}");
    assert!(logs.contains("SIGHUP received"), "{logs}");
}

/// Sends SIGTERM and waits (up to 10 s) for the exit.
fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(exit) = child.try_wait().unwrap() {
            return exit;
        }
        assert!(
            Instant::now() < deadline,
            "scalwsd did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One request on a new connection: the whole reply.
fn get(port: u16) -> std::io::Result<String> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

/// The names of the process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
fn several_workers_serve_with_either_scheduler_and_drain() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str, usize); 3] = [
        // The default: an event loop per worker, two beside the main thread.
        (&["--workers", "3"], "", 2),
        (&["--workers", "3", "--scheduler", "work_stealing"], "", 0),
        // From the file; the command line's --workers still counts.
        (&["--workers", "3"], "scheduler: work_stealing\n", 0),
    ];
    for (args, extra, per_worker_threads) in cases {
        let port = free_port();
        let file = dir.path().join("workers.yaml");
        std::fs::write(
            &file,
            format!("{extra}listeners: [{{ name: http, address: 127.0.0.1:{port} }}]\napplications:\n  - {{ name: a, domains: ['*'], routes: [{{ path: /, respond: {{ body: many }} }}] }}\n"),
        )
        .unwrap();
        let mut child = Command::new(BIN)
            .args(args)
            .arg("--config")
            .arg(&file)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while get(port).is_err() {
            assert!(Instant::now() < deadline, "scalwsd did not start: {args:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Thirty connections, spread by the kernel over the workers' sockets.
        for _ in 0..30 {
            let reply = get(port).unwrap();
            assert!(reply.starts_with("HTTP/1.1 200"), "{args:?}: {reply}");
            assert!(reply.ends_with("many"), "{args:?}: {reply}");
        }
        let workers = thread_names(child.id())
            .iter()
            .filter(|name| name.starts_with("scalws-worker-"))
            .count();
        assert_eq!(workers, per_worker_threads, "{args:?} {extra:?}");

        assert_eq!(terminate(&mut child).code(), Some(0), "{args:?}");
        assert!(get(port).is_err(), "{args:?}: still serving");
    }
}

#[test]
fn an_unknown_scheduler_on_the_command_line_exits_2() {
    let output = Command::new(BIN)
        .args(["--scheduler", "round_robin", "--check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("expected one of per_worker, work_stealing"),
        "{stderr}"
    );
}
