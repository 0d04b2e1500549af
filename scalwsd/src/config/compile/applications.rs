//! `applications:`: domains, listeners, `https_redirect`, the response cache, and the routes handed to `routes.rs`.

use super::*;

impl Compiler<'_> {
    pub(super) fn application(
        &mut self,
        path: &str,
        app: &ApplicationFile,
        listener_names: &[&str],
    ) -> Option<ApplicationBuilder> {
        let name = app.name.value.as_str();
        let mut builder = Application::builder(name);
        let mut ok = true;

        if let Some(list) = &app.listeners {
            if list.is_empty() {
                self.errors.at(
                    &app.name.referenced,
                    format!("{path}.listeners"),
                    "must name at least one listener",
                );
                ok = false;
            }
            for (j, listener) in list.iter().enumerate() {
                if listener_names.contains(&listener.value.as_str()) {
                    builder = builder.listener(listener.value.as_str());
                } else {
                    let hint = did_you_mean(&listener.value, listener_names.iter().copied());
                    self.errors.at(
                        &listener.referenced,
                        format!("{path}.listeners[{j}]"),
                        format!("unknown listener \"{}\"{hint}", listener.value),
                    );
                    ok = false;
                }
            }
        }

        if app.domains.is_empty() {
            self.errors.at(
                &app.name.referenced,
                format!("{path}.domains"),
                "must list at least one domain (\"*\" matches any)",
            );
            ok = false;
        }
        for (j, domain) in app.domains.iter().enumerate() {
            let at = format!("{path}.domains[{j}]");
            if let Err(error) = HostPattern::parse(&domain.value) {
                self.errors.at(&domain.referenced, at, error.to_string());
                ok = false;
                continue;
            }
            // A domain claimed twice on a listener is refused by the host
            // table when the gateway is built; `compile` locates it.
            builder = match builder.domain(&domain.value) {
                Ok(builder) => builder,
                Err(_) => return None,
            };
        }
        #[cfg(feature = "cache")]
        {
            self.cache = app
                .cache
                .as_ref()
                .and_then(|c| self.cache(&format!("{path}.cache"), name, c));
        }
        #[cfg(not(feature = "cache"))]
        if let Some(cache) = &app.cache {
            let at = format!("{path}.cache");
            self.not_built(&cache.referenced, at, "The response cache", "cache");
        }
        if self.https_redirect(path, &app.https_redirect) {
            builder = builder.https_redirect(true);
        }

        builder = builder.metrics(&self.previous.metrics);
        for (k, route) in app.routes.iter().enumerate() {
            let route_path = format!("{path}.routes[{k}]");
            match self.route(&route_path, route) {
                Some(spec) => {
                    if let Err(error) = builder.add_route(spec) {
                        let (at, key) = route_location(&route.value);
                        let at = at.unwrap_or(route.referenced);
                        self.errors
                            .at(&at, format!("{route_path}.{key}"), error.to_string());
                        ok = false;
                    }
                }
                None => ok = false,
            }
        }
        ok.then_some(builder)
    }

    /// Whether `https_redirect` is on; on without an https listener is an error.
    pub(super) fn https_redirect(&mut self, path: &str, flag: &Option<Spanned<bool>>) -> bool {
        let Some(flag) = flag.as_ref().filter(|f| f.value) else {
            return false;
        };
        if self.https_port.is_none() {
            self.errors.at(
                &flag.referenced,
                format!("{path}.https_redirect"),
                "https_redirect needs an https listener",
            );
            return false;
        }
        true
    }

    /// The application's response cache: the previous configuration's when
    /// the application had one with the same settings.
    #[cfg(feature = "cache")]
    pub(super) fn cache(
        &mut self,
        path: &str,
        app: &str,
        file: &Spanned<CacheFile>,
    ) -> Option<Cache> {
        let defaults = CacheOptions::default();
        let f = &file.value;
        let max_size = f.max_size.as_ref().map_or(defaults.max_size, |v| v.value.0);
        let max_object = f
            .max_object
            .as_ref()
            .map_or(defaults.max_object, |v| v.value.0);
        let before = self.errors_len();
        if let Some(v) = &f.max_size
            && v.value.0 == 0
        {
            self.errors.at(
                &v.referenced,
                format!("{path}.max_size"),
                "must be more than 0",
            );
        }
        if max_object > max_size {
            let at = f
                .max_object
                .as_ref()
                .map_or(file.referenced, |v| v.referenced);
            self.errors.at(
                &at,
                format!("{path}.max_object"),
                "must not be larger than max_size",
            );
        }
        if self.errors_len() != before {
            return None;
        }
        let options = CacheOptions {
            max_size,
            max_object,
            default_ttl: f
                .default_ttl
                .as_ref()
                .map_or(defaults.default_ttl, |v| v.value.0),
            ..defaults
        };
        let cache = match self.previous.caches.get(app) {
            Some((old, cache)) if *old == options => cache.clone(),
            _ => Cache::new(options.clone()),
        };
        self.caches.insert(app.to_owned(), (options, cache.clone()));
        Some(cache)
    }
}
