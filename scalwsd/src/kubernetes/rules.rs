//! HTTPRoute rules: matches, filters, timeouts and backendRefs, as ScalWS
//! routes with their policies and actions.

use std::collections::BTreeMap;

use gateway_api::apis::standard::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesFilters,
    HttpRouteRulesFiltersRequestRedirectPathType as RedirectType,
    HttpRouteRulesFiltersRequestRedirectScheme as Scheme, HttpRouteRulesFiltersType as FilterType,
    HttpRouteRulesFiltersUrlRewritePathType as RewriteType, HttpRouteRulesMatches,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::backends::{PortRef, Unresolved};
use super::document::{
    Backend, Headers, Match, Origin, PathMatch, Redirect, Respond, Rewrite, Route,
};
use super::gateway::GROUP;
use super::resources::{name, namespace};
use super::status::Condition;
use super::translate::Translator;

/// A route's rules, translated once and placed under each listener it attaches to.
pub(crate) struct Rules {
    rules: Vec<Rule>,
    /// Backend references that did not resolve, in order.
    unresolved: Vec<Unresolved>,
    /// What is not supported or not valid, per rule.
    pub(crate) problems: Vec<String>,
    /// Rules that answer 500 or match nothing because of a problem.
    invalid: usize,
}

struct Rule {
    index: usize,
    matches: Vec<Match>,
    action: Action,
    rewrite: Option<Rewrite>,
    request_headers: Option<Headers>,
    response_headers: Option<Headers>,
    timeout: Option<String>,
}

enum Action {
    Proxy(String),
    Backends(Vec<Backend>),
    Respond(u16),
    /// The redirect; its port is filled per listener when the filter gives
    /// neither port nor scheme.
    Redirect(Redirect),
}

impl Rules {
    pub(crate) fn all_invalid(&self) -> bool {
        !self.rules.is_empty() && self.invalid == self.rules.len()
    }

    pub(crate) fn resolved_refs(&self) -> Condition {
        match self.unresolved.first() {
            None => Condition::ok("ResolvedRefs"),
            Some(first) => {
                let messages: Vec<&str> =
                    self.unresolved.iter().map(|u| u.message.as_str()).collect();
                Condition::new("ResolvedRefs", false, first.reason, messages.join("; "))
            }
        }
    }

    pub(crate) fn partially_invalid(&self) -> Option<Condition> {
        (self.invalid > 0 && !self.all_invalid()).then(|| {
            Condition::new(
                "PartiallyInvalid",
                true,
                "UnsupportedValue",
                self.problems.join("; "),
            )
        })
    }
}

impl Translator<'_> {
    pub(crate) fn rules(&mut self, route: &HttpRoute) -> Rules {
        let mut out = Rules {
            rules: Vec::new(),
            unresolved: Vec::new(),
            problems: Vec::new(),
            invalid: 0,
        };
        let ns = namespace(&route.metadata).to_owned();
        for (index, rule) in route.spec.rules.iter().flatten().enumerate() {
            let before = out.problems.len();
            let translated = self.rule(&ns, index, rule, &mut out);
            if out.problems.len() > before {
                out.invalid += 1;
            }
            out.rules.push(translated);
        }
        out
    }

    fn rule(&mut self, ns: &str, index: usize, rule: &HttpRouteRules, out: &mut Rules) -> Rule {
        let problem =
            |out: &mut Rules, text: String| out.problems.push(format!("rule {index}: {text}"));
        let default_match = [HttpRouteRulesMatches::default()];
        let written = rule
            .matches
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or(&default_match);
        let mut matches = Vec::new();
        for m in written {
            match translate_match(m) {
                Ok(m) => matches.push(m),
                Err(text) => problem(out, text),
            }
        }
        let mut translated = Rule {
            index,
            matches,
            action: Action::Respond(500),
            rewrite: None,
            request_headers: None,
            response_headers: None,
            timeout: None,
        };
        let mut redirect = None;
        let mut unsupported = None;
        let mut seen = Vec::new();
        for filter in rule.filters.iter().flatten() {
            let kind = format!("{:?}", filter.r#type);
            if seen.contains(&kind) {
                continue; // The API allows each core filter once; the first counts.
            }
            seen.push(kind);
            match self.filter(filter, &mut translated) {
                Ok(Some(r)) => redirect = Some(r),
                Ok(None) => {}
                Err(text) => unsupported = Some(text),
            }
        }
        if redirect.is_some() && translated.rewrite.is_some() {
            unsupported = Some("RequestRedirect and URLRewrite cannot be combined".to_owned());
        }
        let prefix_change = redirect
            .as_ref()
            .is_some_and(|r: &Redirect| r.prefix.is_some())
            || translated
                .rewrite
                .as_ref()
                .is_some_and(|r| r.prefix.is_some());
        if prefix_change
            && translated
                .matches
                .iter()
                .any(|m| !matches!(m.path, PathMatch::Prefix(_)))
        {
            unsupported = Some("ReplacePrefixMatch needs PathPrefix matches".to_owned());
        }
        if let Some(timeouts) = &rule.timeouts {
            let request = timeouts.request.as_deref().map(parse_duration);
            let backend = timeouts.backend_request.as_deref().map(parse_duration);
            match (request, backend) {
                (Some(Err(t)), _) | (_, Some(Err(t))) => unsupported = Some(t),
                (r, b) => {
                    // ScalWS times a route until the response head, which is
                    // what both timeouts bound here: the shorter one holds.
                    let ms = [r, b]
                        .into_iter()
                        .flatten()
                        .flatten()
                        .filter(|&ms| ms > 0)
                        .min();
                    translated.timeout = ms.map(|ms| format!("{ms}ms"));
                }
            }
        }
        if let Some(text) = unsupported {
            problem(out, text);
            translated.action = Action::Respond(500);
            translated.rewrite = None;
            return translated;
        }
        if let Some(redirect) = redirect {
            translated.action = Action::Redirect(redirect);
            return translated;
        }
        translated.action = self.rule_backends(ns, rule, out);
        translated
    }

    /// Applies one filter to the rule; a redirect is returned, since it replaces the action.
    fn filter(
        &mut self,
        filter: &HttpRouteRulesFilters,
        rule: &mut Rule,
    ) -> Result<Option<Redirect>, String> {
        match filter.r#type {
            FilterType::RequestHeaderModifier => {
                let m = filter
                    .request_header_modifier
                    .as_ref()
                    .ok_or("RequestHeaderModifier without its settings")?;
                rule.request_headers = Some(headers(
                    m.set.iter().flatten().map(|h| (&h.name, &h.value)),
                    m.add.iter().flatten().map(|h| (&h.name, &h.value)),
                    m.remove.iter().flatten(),
                ));
                Ok(None)
            }
            FilterType::ResponseHeaderModifier => {
                let m = filter
                    .response_header_modifier
                    .as_ref()
                    .ok_or("ResponseHeaderModifier without its settings")?;
                rule.response_headers = Some(headers(
                    m.set.iter().flatten().map(|h| (&h.name, &h.value)),
                    m.add.iter().flatten().map(|h| (&h.name, &h.value)),
                    m.remove.iter().flatten(),
                ));
                Ok(None)
            }
            FilterType::RequestRedirect => {
                let r = filter
                    .request_redirect
                    .as_ref()
                    .ok_or("RequestRedirect without its settings")?;
                let mut redirect = Redirect {
                    scheme: r.scheme.as_ref().map(|s| match s {
                        Scheme::Http => "http".to_owned(),
                        Scheme::Https => "https".to_owned(),
                    }),
                    host: r.hostname.clone(),
                    port: match r.port {
                        None => None,
                        Some(p) => Some(
                            u16::try_from(p)
                                .ok()
                                .filter(|p| *p > 0)
                                .ok_or(format!("redirect port {p} is out of range"))?,
                        ),
                    },
                    status: Some(match r.status_code.unwrap_or(302) {
                        code @ (301 | 302 | 303 | 307 | 308) => code as u16,
                        code => return Err(format!("redirect statusCode {code} is not supported")),
                    }),
                    ..Redirect::default()
                };
                if let Some(path) = &r.path {
                    match path.r#type {
                        RedirectType::ReplaceFullPath => {
                            redirect.path = Some(
                                path.replace_full_path
                                    .clone()
                                    .unwrap_or_else(|| "/".to_owned()),
                            );
                        }
                        RedirectType::ReplacePrefixMatch => {
                            redirect.prefix =
                                Some(path.replace_prefix_match.clone().unwrap_or_default());
                        }
                    }
                }
                Ok(Some(redirect))
            }
            FilterType::UrlRewrite => {
                let r = filter
                    .url_rewrite
                    .as_ref()
                    .ok_or("URLRewrite without its settings")?;
                let mut rewrite = Rewrite {
                    host: r.hostname.clone(),
                    ..Rewrite::default()
                };
                if let Some(path) = &r.path {
                    match path.r#type {
                        RewriteType::ReplaceFullPath => {
                            rewrite.path = Some(
                                path.replace_full_path
                                    .clone()
                                    .unwrap_or_else(|| "/".to_owned()),
                            );
                        }
                        RewriteType::ReplacePrefixMatch => {
                            rewrite.prefix =
                                Some(path.replace_prefix_match.clone().unwrap_or_default());
                        }
                    }
                }
                if rewrite != Rewrite::default() {
                    rule.rewrite = Some(rewrite);
                }
                Ok(None)
            }
            FilterType::RequestMirror | FilterType::ExtensionRef | FilterType::Cors => {
                Err(format!("filter type {:?} is not supported", filter.r#type))
            }
        }
    }

    fn rule_backends(&mut self, ns: &str, rule: &HttpRouteRules, out: &mut Rules) -> Action {
        let refs = rule.backend_refs.as_deref().unwrap_or(&[]);
        if refs.is_empty() {
            return Action::Respond(500);
        }
        let mut shares = Vec::new();
        for r in refs {
            let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
            let target_ns = r.namespace.as_deref().unwrap_or(ns);
            let resolved = if r.group.as_deref().is_some_and(|g| !g.is_empty())
                || r.kind.as_deref().is_some_and(|k| k != "Service")
            {
                Err(Unresolved::new(
                    "InvalidKind",
                    format!(
                        "backendRef {}/{} of kind {} is not supported",
                        r.group.as_deref().unwrap_or(""),
                        r.name,
                        r.kind.as_deref().unwrap_or("Service")
                    ),
                ))
            } else if target_ns != ns
                && !self.resources.granted(
                    (GROUP, "HTTPRoute", ns),
                    ("", "Service", target_ns, &r.name),
                )
            {
                Err(Unresolved::new(
                    "RefNotPermitted",
                    format!(
                        "no ReferenceGrant in {target_ns} lets HTTPRoutes of {ns} use Service {}",
                        r.name
                    ),
                ))
            } else if r.filters.as_ref().is_some_and(|f| !f.is_empty()) {
                out.problems.push(format!(
                    "backendRef {}: per-backend filters are not supported",
                    r.name
                ));
                Ok(Backend {
                    proxy: None,
                    status: Some(500),
                    weight,
                })
            } else {
                match r.port {
                    None => Err(Unresolved::new(
                        "UnsupportedValue",
                        format!("backendRef to Service {} needs a port", r.name),
                    )),
                    Some(port) => {
                        self.service_backend(target_ns, &r.name, PortRef::Number(port), weight)
                    }
                }
            };
            shares.push(resolved.unwrap_or_else(|unresolved| {
                out.unresolved.push(unresolved);
                Backend {
                    proxy: None,
                    status: Some(500),
                    weight,
                }
            }));
        }
        backends_action(shares)
    }

    /// Adds the rules' routes to the application `key`, under a listener on `port`.
    pub(crate) fn place(
        &mut self,
        rules: &Rules,
        meta: &ObjectMeta,
        key: (u16, String),
        port: u16,
    ) {
        let app = self.apps.entry(key).or_default();
        for rule in &rules.rules {
            for (j, m) in rule.matches.iter().enumerate() {
                let mut route = Route {
                    matcher: m.clone(),
                    rewrite: rule.rewrite.clone(),
                    request_headers: rule.request_headers.clone(),
                    response_headers: rule.response_headers.clone(),
                    timeout: rule.timeout.clone(),
                    origin: Some(Origin::of("HTTPRoute", meta)),
                    ..Route::default()
                };
                match &rule.action {
                    Action::Proxy(upstream) => route.proxy = Some(upstream.clone()),
                    Action::Backends(b) => route.backends = Some(b.clone()),
                    Action::Respond(status) => route.respond = Some(Respond::status(*status)),
                    Action::Redirect(r) => {
                        let mut r = r.clone();
                        // The Gateway API: without scheme and port, the port
                        // is the listener's (the one clients use).
                        if r.scheme.is_none() && r.port.is_none() {
                            r.port = Some(port);
                        }
                        route.redirect = Some(r);
                    }
                }
                if route.redirect.is_some() || route.respond.is_some() {
                    route.timeout = None;
                }
                let key = (
                    meta.creation_timestamp.clone(),
                    namespace(meta).to_owned(),
                    name(meta).to_owned(),
                    rule.index,
                    j,
                );
                app.routes.push((key, route));
            }
        }
    }
}

/// One share alone is a plain `proxy` (or a fixed answer); several are a split.
fn backends_action(mut shares: Vec<Backend>) -> Action {
    if shares.len() == 1 && shares[0].weight > 0 {
        let share = shares.remove(0);
        return match (share.proxy, share.status) {
            (Some(upstream), _) => Action::Proxy(upstream),
            (None, status) => Action::Respond(status.unwrap_or(500)),
        };
    }
    Action::Backends(shares)
}

fn translate_match(m: &HttpRouteRulesMatches) -> Result<Match, String> {
    let path = match &m.path {
        None => PathMatch::Prefix("/".to_owned()),
        Some(p) => {
            let value = p.value.clone().unwrap_or_else(|| "/".to_owned());
            if !value.starts_with('/') {
                return Err(format!("path {value:?} does not start with /"));
            }
            match p.r#type {
                None | Some(HttpRouteRulesMatchesPathType::PathPrefix) => PathMatch::Prefix(value),
                Some(HttpRouteRulesMatchesPathType::Exact) => PathMatch::Exact(value),
                Some(HttpRouteRulesMatchesPathType::RegularExpression) => {
                    return Err("RegularExpression path matches are not supported".to_owned());
                }
            }
        }
    };
    let mut headers = BTreeMap::new();
    for h in m.headers.iter().flatten() {
        if h.r#type == Some(HttpRouteRulesMatchesHeadersType::RegularExpression) {
            return Err("RegularExpression header matches are not supported".to_owned());
        }
        // The first of equal names counts (names are case-insensitive).
        headers
            .entry(h.name.to_ascii_lowercase())
            .or_insert_with(|| h.value.clone());
    }
    let mut query = BTreeMap::new();
    for q in m.query_params.iter().flatten() {
        if q.r#type == Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression) {
            return Err("RegularExpression query parameter matches are not supported".to_owned());
        }
        query
            .entry(q.name.clone())
            .or_insert_with(|| q.value.clone());
    }
    let methods = m.method.as_ref().map(|method| {
        let text = serde_json::to_value(method)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        vec![text]
    });
    Ok(Match {
        path,
        methods,
        headers,
        query,
    })
}

fn headers<'a>(
    set: impl Iterator<Item = (&'a String, &'a String)>,
    add: impl Iterator<Item = (&'a String, &'a String)>,
    remove: impl Iterator<Item = &'a String>,
) -> Headers {
    let mut out = Headers::default();
    for (name, value) in set {
        out.set
            .entry(name.to_ascii_lowercase())
            .or_insert_with(|| value.clone());
    }
    for (name, value) in add {
        out.add
            .entry(name.to_ascii_lowercase())
            .or_insert_with(|| value.clone());
    }
    for name in remove {
        let name = name.to_ascii_lowercase();
        if !out.remove.contains(&name) {
            out.remove.push(name);
        }
    }
    out
}

/// A Gateway API duration (`1h`, `500ms`, `1m30s`), in milliseconds.
fn parse_duration(text: &str) -> Result<u64, String> {
    let invalid = || format!("duration {text:?} is not valid (expected e.g. 500ms, 10s, 1m30s)");
    let mut total: u64 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        if digits == 0 || digits > 5 {
            return Err(invalid());
        }
        let number: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('s') {
            (1_000, 1)
        } else {
            return Err(invalid());
        };
        rest = &rest[len..];
        total = total.saturating_add(number.saturating_mul(unit));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;

    #[test]
    fn gateway_durations() {
        assert_eq!(parse_duration("1s"), Ok(1_000));
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("1h1m1s1ms"), Ok(3_661_001));
        assert_eq!(parse_duration("0s"), Ok(0));
        assert!(parse_duration("1").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1d").is_err());
        assert!(parse_duration("").is_err());
    }
}
