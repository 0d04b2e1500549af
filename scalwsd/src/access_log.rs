//! `access_log:` wired into the server: the layer around the gateway when the
//! log is on, the gateway alone when it is off (no per-request cost then).

use scalws_proxy::SharedGateway;
use scalws_proxy::access_log::{AccessLog, AccessLogLayer, LogTarget};
use tower::Layer;
use tower::util::Either;

use crate::config::AccessLogTarget;

/// What the listeners serve: the gateway, logged or not.
pub(crate) type Served =
    Either<scalws_proxy::access_log::AccessLogService<SharedGateway>, SharedGateway>;

/// The process's access log, if `access_log` turns it on.
pub(crate) struct AccessLogs {
    log: Option<AccessLog>,
}

impl AccessLogs {
    /// Opens the log (a file is created if missing) and starts its writer.
    pub(crate) fn start(target: &AccessLogTarget) -> Result<Self, String> {
        let target = match target {
            AccessLogTarget::Off => return Ok(Self { log: None }),
            AccessLogTarget::Stdout => LogTarget::Stdout,
            AccessLogTarget::File(path) => LogTarget::File(path.clone()),
        };
        let log =
            AccessLog::start(target.clone(), AccessLog::DEFAULT_CAPACITY).map_err(|error| {
                match &target {
                    LogTarget::File(path) => {
                        format!("access_log: cannot open {}: {error}", path.display())
                    }
                    LogTarget::Stdout => format!("access_log: {error}"),
                }
            })?;
        Ok(Self { log: Some(log) })
    }

    /// The service the listeners run.
    pub(crate) fn layer(&self, gateway: SharedGateway) -> Served {
        match &self.log {
            Some(log) => Either::Left(AccessLogLayer::new(log.clone()).layer(gateway)),
            None => Either::Right(gateway),
        }
    }

    /// Lines written, dropped and lost to write errors so far, when the log is on.
    pub(crate) fn counts(&self) -> Option<(u64, u64, u64)> {
        self.log
            .as_ref()
            .map(|log| (log.written(), log.dropped(), log.failed()))
    }

    /// Reopens the file (after a rotation moved it away): SIGUSR1.
    pub(crate) fn reopen(&self) {
        if let Some(log) = &self.log {
            log.reopen();
        }
    }

    /// Waits until every line logged so far is written.
    pub(crate) async fn flush(&self) {
        if let Some(log) = &self.log {
            log.flush().await;
        }
    }
}
