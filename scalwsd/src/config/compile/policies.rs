//! The policies of a route: `rewrite` (path and host) and the request and response header changes.

use super::*;

impl Compiler<'_> {
    pub(super) fn rewrite(
        &mut self,
        path: &str,
        rewrite: &Spanned<RewriteFile>,
        route_path: Option<&PathMatch>,
    ) -> Option<Rewrite> {
        let f = &rewrite.value;
        if f.path.is_none() && f.prefix.is_none() && f.host.is_none() {
            self.errors.at(
                &rewrite.referenced,
                path,
                "needs at least one of path, prefix or host",
            );
            return None;
        }
        let before = self.errors_len();
        let mut out = Rewrite::new();
        if let Some(modifier) = self.path_modifier(path, &f.path, &f.prefix, route_path) {
            out = out.path(modifier);
        }
        if let Some(host) = &f.host {
            match out.clone().host(&host.value) {
                Ok(with_host) => out = with_host,
                Err(error) => self.errors.at(
                    &host.referenced,
                    format!("{path}.host"),
                    format!("{error}: expected a name or an address, with an optional :port"),
                ),
            }
        }
        (self.errors_len() == before).then_some(out)
    }

    /// `path` (full replacement) or `prefix` (the matched prefix replaced, on prefix routes).
    pub(super) fn path_modifier(
        &mut self,
        path: &str,
        full: &Option<Spanned<String>>,
        prefix: &Option<Spanned<String>>,
        route_path: Option<&PathMatch>,
    ) -> Option<PathModifier> {
        match (full, prefix) {
            (None, None) => None,
            (Some(_), Some(prefix)) => {
                self.errors.at(
                    &prefix.referenced,
                    format!("{path}.prefix"),
                    "give either path or prefix, not both",
                );
                None
            }
            (Some(full), None) => match PathModifier::full(&full.value) {
                Ok(modifier) => Some(modifier),
                Err(error) => {
                    self.errors
                        .at(&full.referenced, format!("{path}.path"), error.to_string());
                    None
                }
            },
            (None, Some(prefix)) => {
                let kind = match route_path {
                    Some(PathMatch::Exact(_)) => Some("an exact path"),
                    Some(PathMatch::Pattern(_)) => Some("a pattern"),
                    Some(PathMatch::Prefix(_)) | None => None,
                };
                if let Some(kind) = kind {
                    self.errors.at(
                        &prefix.referenced,
                        format!("{path}.prefix"),
                        format!("replaces the prefix the route matched, but this route matches {kind}; use path for a full replacement"),
                    );
                    return None;
                }
                match PathModifier::prefix(&prefix.value) {
                    Ok(modifier) => Some(modifier),
                    Err(error) => {
                        self.errors.at(
                            &prefix.referenced,
                            format!("{path}.prefix"),
                            error.to_string(),
                        );
                        None
                    }
                }
            }
        }
    }

    /// `set`, `add`, `remove`; names case-insensitive, each at most once per list.
    pub(super) fn header_modifier(
        &mut self,
        path: &str,
        headers: &Spanned<HeadersFile>,
        request: bool,
    ) -> Option<HeaderModifier> {
        let f = &headers.value;
        let before = self.errors_len();
        let mut out = HeaderModifier::new();
        for (list, entries) in [("set", &f.set), ("add", &f.add)] {
            let mut seen: HashMap<HeaderName, ()> = HashMap::new();
            for (name, value) in entries {
                let at = format!("{path}.{list}.{name}");
                let Some(header) = self.modifiable_header(&at, name, &value.referenced, request)
                else {
                    continue;
                };
                if seen.insert(header.clone(), ()).is_some() {
                    self.errors.at(
                        &value.referenced,
                        at,
                        format!("header \"{header}\" is given twice (names are case-insensitive)"),
                    );
                    continue;
                }
                match HeaderValue::from_str(&value.value) {
                    Ok(v) if list == "set" => out = out.set(header, v),
                    Ok(v) => out = out.add(header, v),
                    Err(_) => self
                        .errors
                        .at(&value.referenced, at, "invalid header value"),
                }
            }
        }
        for (i, name) in f.remove.iter().enumerate() {
            match HeaderName::from_bytes(name.value.as_bytes()) {
                Ok(header) => out = out.remove(header),
                Err(_) => self.errors.at(
                    &name.referenced,
                    format!("{path}.remove[{i}]"),
                    format!("invalid header name \"{}\"", name.value),
                ),
            }
        }
        (self.errors_len() == before).then_some(out)
    }

    /// A header name `set` and `add` may change: not one that frames the message
    /// or belongs to the connection, which the proxy owns.
    pub(super) fn modifiable_header(
        &mut self,
        at: &str,
        name: &str,
        location: &Location,
        request: bool,
    ) -> Option<HeaderName> {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            self.errors
                .at(location, at, format!("invalid header name \"{name}\""));
            return None;
        };
        const MANAGED: [&str; 8] = [
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "upgrade",
        ];
        if MANAGED.contains(&header.as_str()) {
            self.errors.at(
                location,
                at,
                format!("\"{header}\" frames the message or belongs to the connection; it cannot be changed"),
            );
            return None;
        }
        if request && header == http::header::HOST {
            self.errors.at(
                location,
                at,
                "the host is changed with rewrite.host, not request_headers",
            );
            return None;
        }
        Some(header)
    }
}
