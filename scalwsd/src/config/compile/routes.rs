//! One route: its match (path, methods, headers, query), its action (`actions.rs`) and its policies (`policies.rs`).

use super::*;

impl Compiler<'_> {
    pub(super) fn route(
        &mut self,
        path: &str,
        route: &Spanned<RouteFile>,
    ) -> Option<RouteSpec<Route>> {
        let r = &route.value;
        let before = self.errors_len();

        let path_match = self.path_match(path, r);

        let (methods, headers, query) = match &r.matcher {
            None => (None, Vec::new(), Vec::new()),
            Some(m) => {
                let methods = m.methods.as_ref().map(|list| {
                    if list.is_empty() {
                        self.errors.at(
                            &route.referenced,
                            format!("{path}.match.methods"),
                            "must list at least one method",
                        );
                    }
                    list.iter()
                        .enumerate()
                        .filter_map(|(j, method)| {
                            self.method(&format!("{path}.match.methods[{j}]"), method)
                        })
                        .collect::<Vec<_>>()
                });
                let mut headers = Vec::new();
                for (name, value) in &m.headers {
                    let at = format!("{path}.match.headers.{name}");
                    match (
                        HeaderName::from_bytes(name.as_bytes()),
                        HeaderValue::from_str(&value.value),
                    ) {
                        (Ok(n), Ok(v)) => headers.push((n, v)),
                        (Err(_), _) => self.errors.at(
                            &value.referenced,
                            at,
                            format!("invalid header name \"{name}\""),
                        ),
                        (_, Err(_)) => {
                            self.errors
                                .at(&value.referenced, at, "invalid header value")
                        }
                    }
                }
                let query = m
                    .query
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value.clone()))
                    .collect();
                (methods, headers, query)
            }
        };

        let mut actions: Vec<&str> = Vec::new();
        let mut target = None;
        if let Some(respond) = &r.respond {
            actions.push("respond");
            target = self
                .respond(&format!("{path}.respond"), respond)
                .map(Action::Respond);
        }
        if let Some(files) = &r.static_files {
            actions.push("static");
            // The route strips its own prefix when it is added (scalws-proxy's
            // Route), unless it rewrites the path.
            #[cfg(feature = "static-files")]
            {
                target = self
                    .static_files(&format!("{path}.static"), files)
                    .map(Action::Static);
            }
            #[cfg(not(feature = "static-files"))]
            self.not_built(
                &files.referenced,
                format!("{path}.static"),
                "Serving static files",
                "static-files",
            );
        }
        if let Some(target_name) = &r.proxy {
            actions.push("proxy");
            target = self
                .upstreams
                .resolve(&format!("{path}.proxy"), target_name, self.errors)
                .map(|pool| {
                    let proxy = Proxy::new(pool);
                    #[cfg(feature = "cache")]
                    if let (Some(cache), None | Some(true)) =
                        (&self.cache, r.cache.as_ref().map(|c| c.value))
                    {
                        // Partitioned by the route's conditions when it is added.
                        return Action::Proxy(proxy.with_route_cache(cache));
                    }
                    Action::Proxy(proxy)
                });
        }
        if let Some(list) = &r.backends {
            actions.push("backends");
            target = self
                .backends(&format!("{path}.backends"), list)
                .map(Action::Backends);
        }
        if let Some(redirect) = &r.redirect {
            actions.push("redirect");
            target = self
                .redirect(&format!("{path}.redirect"), redirect, path_match.as_ref())
                .map(Action::Redirect);
        }
        let rewrite = r.rewrite.as_ref().and_then(|rewrite| {
            if r.redirect.is_some() {
                self.errors.at(
                    &rewrite.referenced,
                    format!("{path}.rewrite"),
                    "a redirect answers before any rewrite; give one of redirect or rewrite",
                );
            }
            self.rewrite(&format!("{path}.rewrite"), rewrite, path_match.as_ref())
        });
        let request_headers = r.request_headers.as_ref().and_then(|headers| {
            self.header_modifier(&format!("{path}.request_headers"), headers, true)
        });
        let response_headers = r.response_headers.as_ref().and_then(|headers| {
            self.header_modifier(&format!("{path}.response_headers"), headers, false)
        });
        if let Some(flag) = &r.cache {
            if flag.value && !self.has_cache() {
                self.errors.at(
                    &flag.referenced,
                    format!("{path}.cache"),
                    "cache: true needs a cache on the application (applications[].cache)",
                );
            }
            if r.proxy.is_none() {
                self.errors.at(
                    &flag.referenced,
                    format!("{path}.cache"),
                    "cache applies only to proxy routes",
                );
            }
        }
        let https_redirect = self.https_redirect(path, &r.https_redirect);
        match actions.len() {
            1 => {}
            0 => self.errors.at(
                &route.referenced,
                path,
                "a route needs an action: one of respond, static, proxy, redirect or backends",
            ),
            _ => self.errors.at(
                &route.referenced,
                path,
                format!(
                    "a route takes exactly one action, this one has {}",
                    actions.join(", ")
                ),
            ),
        }
        if self.errors_len() != before {
            return None;
        }
        let mut target = Route::new(target?).https_redirect(https_redirect);
        if let Some(timeout) = &r.timeout {
            target = target.timeout(timeout.value.0);
        }
        if let Some(rewrite) = rewrite {
            target = target.rewrite(rewrite);
        }
        if let Some(headers) = request_headers {
            target = target.request_headers(headers);
        }
        if let Some(headers) = response_headers {
            target = target.response_headers(headers);
        }
        Some(RouteSpec {
            path: path_match?,
            methods,
            headers,
            query,
            target,
        })
    }

    pub(super) fn path_match(&mut self, path: &str, r: &RouteFile) -> Option<PathMatch> {
        let from_match = r.matcher.as_ref().and_then(|m| m.path.as_ref());
        match (&r.path, from_match) {
            (Some(prefix), None) => Some(PathMatch::Prefix(prefix.value.clone())),
            (None, None) => Some(PathMatch::Prefix("/".to_owned())),
            (Some(prefix), Some(_)) => {
                self.errors.at(
                    &prefix.referenced,
                    format!("{path}.path"),
                    "give either path or match.path, not both",
                );
                None
            }
            (None, Some(spanned)) => {
                let p = &spanned.value;
                let given: Vec<(&Spanned<String>, PathMatch)> = [
                    p.exact
                        .as_ref()
                        .map(|v| (v, PathMatch::Exact(v.value.clone()))),
                    p.prefix
                        .as_ref()
                        .map(|v| (v, PathMatch::Prefix(v.value.clone()))),
                    p.pattern
                        .as_ref()
                        .map(|v| (v, PathMatch::Pattern(v.value.clone()))),
                ]
                .into_iter()
                .flatten()
                .collect();
                match given.as_slice() {
                    [(_, matcher)] => Some(matcher.clone()),
                    [] => {
                        self.errors.at(
                            &spanned.referenced,
                            format!("{path}.match.path"),
                            "needs one of exact, prefix or pattern",
                        );
                        None
                    }
                    [_, (second, _), ..] => {
                        self.errors.at(
                            &second.referenced,
                            format!("{path}.match.path"),
                            "takes only one of exact, prefix or pattern",
                        );
                        None
                    }
                }
            }
        }
    }

    pub(super) fn method(&mut self, path: &str, method: &Spanned<String>) -> Option<Method> {
        let text = method.value.as_str();
        let valid = !text.is_empty() && text.bytes().all(|b| b.is_ascii_uppercase() || b == b'-');
        match Method::from_bytes(text.as_bytes()) {
            Ok(m) if valid => Some(m),
            _ => {
                let upper = text.to_ascii_uppercase();
                let hint = if upper != text && Method::from_bytes(upper.as_bytes()).is_ok() {
                    format!(" (did you mean \"{upper}\"? methods are case-sensitive)")
                } else {
                    String::new()
                };
                self.errors.at(
                    &method.referenced,
                    path,
                    format!("invalid method \"{text}\"{hint}"),
                );
                None
            }
        }
    }
}
