//! The actions of a route: `respond`, `static`, `redirect`, `backends` (`proxy` is resolved among the upstreams in `routes.rs`).

use super::*;

impl Compiler<'_> {
    pub(super) fn respond(
        &mut self,
        path: &str,
        respond: &Spanned<crate::config::schema::RespondFile>,
    ) -> Option<Respond> {
        let r = &respond.value;
        let status = match &r.status {
            None => StatusCode::OK,
            Some(s) => match StatusCode::from_u16(s.value) {
                Ok(status) if (200..=599).contains(&s.value) => status,
                _ => {
                    self.errors.at(
                        &s.referenced,
                        format!("{path}.status"),
                        format!("invalid status {} (expected 200 to 599)", s.value),
                    );
                    return None;
                }
            },
        };
        let mut out = Respond::new(status, r.body.clone().into_bytes());
        for (name, value) in &r.headers {
            let at = format!("{path}.headers.{name}");
            let header = match HeaderName::from_bytes(name.as_bytes()) {
                Ok(header) => header,
                Err(_) => {
                    self.errors.at(
                        &value.referenced,
                        at,
                        format!("invalid header name \"{name}\""),
                    );
                    continue;
                }
            };
            if header == http::header::CONTENT_LENGTH {
                self.errors.at(
                    &value.referenced,
                    at,
                    "content-length is set from the body; leave it out",
                );
                continue;
            }
            match HeaderValue::from_str(&value.value) {
                Ok(v) => out = out.header(header, v),
                Err(_) => self
                    .errors
                    .at(&value.referenced, at, "invalid header value"),
            }
        }
        Some(out)
    }

    #[cfg(feature = "static-files")]
    pub(super) fn static_files(
        &mut self,
        path: &str,
        files: &Spanned<crate::config::schema::StaticFile>,
    ) -> Option<StaticFiles> {
        let f = &files.value;
        let root = self.base_dir.join(&f.root.value);
        let defaults = StaticOptions::default();
        let allow_dotfiles = match &f.allow_dotfiles {
            None => defaults.allow_dotfiles,
            Some(names) => {
                let mut allowed = Vec::with_capacity(names.len());
                for (i, name) in names.iter().enumerate() {
                    let n = name.value.as_str();
                    if !n.starts_with('.') || n == "." || n == ".." || n.contains('/') {
                        self.errors.at(
                            &name.referenced,
                            format!("{path}.allow_dotfiles[{i}]"),
                            format!("\"{n}\" is not a dotfile name: one path segment starting with \".\", not \".\" or \"..\""),
                        );
                    } else {
                        allowed.push(n.to_owned());
                    }
                }
                allowed
            }
        };
        let options = StaticOptions {
            root,
            index: Some(f.index.clone().unwrap_or_else(|| "index.html".to_owned()))
                .filter(|i| !i.is_empty()),
            listing: f.listing,
            strip_prefix: String::new(),
            allow_dotfiles,
        };
        match StaticFiles::new(options) {
            Ok(files) => Some(files),
            Err(error) => {
                let hint = if Path::new(&f.root.value).is_relative() {
                    format!(
                        " (relative roots are resolved from the config file's directory, {})",
                        self.base_dir.display()
                    )
                } else {
                    String::new()
                };
                self.errors.at(
                    &f.root.referenced,
                    format!("{path}.root"),
                    format!("{error}{hint}"),
                );
                None
            }
        }
    }

    pub(super) fn redirect(
        &mut self,
        path: &str,
        redirect: &Spanned<RedirectFile>,
        route_path: Option<&PathMatch>,
    ) -> Option<Redirect> {
        let f = &redirect.value;
        let before = self.errors_len();
        let mut out = Redirect::new();
        if let Some(scheme) = &f.scheme {
            match scheme.value.as_str() {
                "http" => out = out.scheme(Scheme::Http),
                "https" => out = out.scheme(Scheme::Https),
                other => {
                    let hint = did_you_mean(other, ["http", "https"]);
                    self.errors.at(
                        &scheme.referenced,
                        format!("{path}.scheme"),
                        format!("unknown scheme \"{other}\"{hint}; expected http or https"),
                    );
                }
            }
        }
        if let Some(host) = &f.host {
            match out.clone().host(&host.value) {
                Ok(with_host) => out = with_host,
                Err(error) => self.errors.at(
                    &host.referenced,
                    format!("{path}.host"),
                    format!("{error}: expected a name or an address without a port (the port goes in port)"),
                ),
            }
        }
        if let Some(port) = &f.port {
            match u16::try_from(port.value) {
                Ok(p) if p > 0 => out = out.port(p),
                _ => self.errors.at(
                    &port.referenced,
                    format!("{path}.port"),
                    "must be between 1 and 65535",
                ),
            }
        }
        if let Some(modifier) = self.path_modifier(path, &f.path, &f.prefix, route_path) {
            out = out.path(modifier);
        }
        if let Some(status) = &f.status {
            let code = StatusCode::from_u16(status.value).unwrap_or(StatusCode::OK);
            match out.clone().status(code) {
                Ok(with_status) => out = with_status,
                Err(_) => self.errors.at(
                    &status.referenced,
                    format!("{path}.status"),
                    format!(
                        "invalid redirect status {} (expected 301, 302, 303, 307 or 308)",
                        status.value
                    ),
                ),
            }
        }
        (self.errors_len() == before).then_some(out)
    }

    pub(super) fn backends(
        &mut self,
        path: &str,
        list: &Spanned<Vec<Spanned<BackendFile>>>,
    ) -> Option<Backends> {
        if list.value.is_empty() {
            self.errors
                .at(&list.referenced, path, "needs at least one backend");
            return None;
        }
        let before = self.errors_len();
        let mut shares = Vec::new();
        for (i, entry) in list.value.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let b = &entry.value;
            let backend = match (&b.proxy, &b.status) {
                (Some(target), None) => self
                    .upstreams
                    .resolve(&format!("{at}.proxy"), target, self.errors)
                    .map(|pool| Backend::Proxy(Proxy::new(pool))),
                (None, Some(status)) => match StatusCode::from_u16(status.value) {
                    Ok(code) if (200..=599).contains(&status.value) => Some(Backend::Status(code)),
                    _ => {
                        self.errors.at(
                            &status.referenced,
                            format!("{at}.status"),
                            format!("invalid status {} (expected 200 to 599)", status.value),
                        );
                        None
                    }
                },
                _ => {
                    self.errors.at(
                        &entry.referenced,
                        at,
                        "a backend takes exactly one of proxy or status",
                    );
                    None
                }
            };
            if let Some(backend) = backend {
                shares.push((backend, b.weight.value));
            }
        }
        (self.errors_len() == before).then(|| Backends::new(shares))
    }
}
