//! A cheap monotonic clock in whole milliseconds, for timeouts counted in
//! seconds that are checked on every request: the connection timeouts (read
//! three times per request) and the upstream idle lists.
//!
//! On Linux it is `CLOCK_MONOTONIC_COARSE`, the kernel's tick (1 to 4 ms
//! old, read from the vDSO without a time-stamp counter read); `Instant`
//! arithmetic costs several times as much. A timeout on it fires within a
//! tick of its time.

use std::sync::OnceLock;
#[cfg(not(target_os = "linux"))]
use std::time::Instant;

/// Milliseconds since the first call in this process, plus one (so that 0
/// can mean "unset" in an atomic). Never goes back.
#[cfg(target_os = "linux")]
pub fn now_ms() -> u64 {
    fn coarse() -> u64 {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        // Never negative: a monotonic clock counts up from boot.
        (now.tv_sec as u64) * 1000 + (now.tv_nsec as u64) / 1_000_000
    }
    static BASE: OnceLock<u64> = OnceLock::new();
    let base = *BASE.get_or_init(coarse);
    coarse().saturating_sub(base) + 1
}

/// Milliseconds since the first call in this process, plus one (so that 0
/// can mean "unset" in an atomic). Never goes back.
#[cfg(not(target_os = "linux"))]
pub fn now_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// A duration in whole milliseconds, saturating.
pub fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_on_and_never_back() {
        let first = now_ms();
        assert!(first >= 1);
        std::thread::sleep(std::time::Duration::from_millis(30));
        let second = now_ms();
        assert!(second >= first + 10, "{first} then {second}");
        assert!(now_ms() >= second);
    }
}
