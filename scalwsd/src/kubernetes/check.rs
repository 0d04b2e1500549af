//! The translation checked the way a file is: its YAML loaded through the
//! configuration's own checks. A route the checks refuse (a header the proxy
//! manages, a path that climbs above the root) answers 500 instead, and its
//! resource's status says why, so one bad rule never takes down the rest.

use std::path::Path;

use crate::config::{self, Carried, Config, ConfigErrors, Inputs};

use super::document::{Respond, Route};
use super::status::Condition;
use super::translate::Translation;

/// The file name configuration errors name.
pub const FILE_NAME: &str = "<kubernetes>";

/// The document's YAML text.
pub fn to_yaml(translation: &Translation) -> String {
    serde_saphyr::to_string(&translation.document)
        .unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
}

/// Loads `translation` (after `previous`), replacing refused routes by 500
/// answers and reporting them in its status. `base` resolves relative paths.
/// Errors that are not a route's (a listener address in use twice) are returned.
pub fn load(
    translation: &mut Translation,
    base: &Path,
    previous: &Carried,
    inputs: &Inputs,
) -> Result<(Config, String), ConfigErrors> {
    // Each round replaces every refused route; a second round can only fail on
    // what the first did not name, so two are enough, and a third is a backstop.
    for _ in 0..3 {
        let yaml = to_yaml(translation);
        match config::load_with(FILE_NAME, &yaml, base, previous, inputs) {
            Ok(config) => return Ok((config, yaml)),
            Err(errors) => {
                let mut replaced = false;
                for error in &errors.0 {
                    if let Some((app, route)) = route_of(&error.path) {
                        replaced |= refuse(translation, app, route, &error.message);
                    }
                }
                // Listeners last: leaving one out renumbers the applications.
                let mut listeners: Vec<(usize, &str)> = errors
                    .0
                    .iter()
                    .filter_map(|e| Some((listener_of(&e.path)?, e.message.as_str())))
                    .collect();
                listeners.sort_by_key(|l| std::cmp::Reverse(l.0));
                listeners.dedup_by_key(|l| l.0);
                for (index, message) in listeners {
                    replaced |= refuse_listener(translation, index, message);
                }
                if !replaced {
                    return Err(errors);
                }
            }
        }
    }
    let yaml = to_yaml(translation);
    config::load_with(FILE_NAME, &yaml, base, previous, inputs).map(|config| (config, yaml))
}

/// `listeners[2]...` -> `2`.
fn listener_of(path: &str) -> Option<usize> {
    let rest = path.strip_prefix("listeners[")?;
    rest.split_once(']')?.0.parse().ok()
}

/// Leaves listener `index` out (with the applications only it serves), and
/// says so in the status of the Gateway listeners and Ingresses on its port:
/// one port that cannot be served (bound twice, the admin listener's) never
/// keeps the rest of the cluster from being served.
pub fn refuse_listener(translation: &mut Translation, index: usize, message: &str) -> bool {
    if index >= translation.document.listeners.len() {
        return false;
    }
    let listener = translation.document.listeners.remove(index);
    translation
        .document
        .applications
        .retain(|a| a.listeners.iter().any(|l| *l != listener.name));
    let port: i32 = listener
        .name
        .rsplit('-')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let text = format!("port {port} is not served: {message}");
    for gateway in &mut translation.status.gateways {
        let mut hit = false;
        for l in gateway.listeners.iter_mut().filter(|l| l.port == port) {
            hit = true;
            l.conditions
                .retain(|c| c.kind != "Accepted" && c.kind != "Programmed");
            l.conditions.insert(
                0,
                Condition::new("Programmed", false, "Invalid", text.clone()),
            );
            l.conditions.insert(
                0,
                Condition::new("Accepted", false, "PortUnavailable", text.clone()),
            );
        }
        if hit {
            gateway.recount();
        }
    }
    if port == 80 || port == 443 {
        for ingress in &mut translation.status.ingresses {
            ingress.problems.push(text.clone());
        }
    }
    true
}

/// `applications[3].routes[1]...` -> `(3, 1)`.
fn route_of(path: &str) -> Option<(usize, usize)> {
    let rest = path.strip_prefix("applications[")?;
    let (app, rest) = rest.split_once(']')?;
    let rest = rest.strip_prefix(".routes[")?;
    let (route, _) = rest.split_once(']')?;
    Some((app.parse().ok()?, route.parse().ok()?))
}

/// Makes route `route` of application `app` answer 500; false if it already does.
fn refuse(translation: &mut Translation, app: usize, route: usize, message: &str) -> bool {
    let Some(slot) = translation
        .document
        .applications
        .get_mut(app)
        .and_then(|a| a.routes.get_mut(route))
    else {
        return false;
    };
    let failed = Route {
        matcher: slot.matcher.clone(),
        respond: Some(Respond::status(500)),
        origin: slot.origin.clone(),
        ..Route::default()
    };
    if *slot == failed {
        return false;
    }
    *slot = failed;
    let Some(origin) = &slot.origin else {
        return true;
    };
    let text = format!("a rule answers 500: {message}");
    match origin.kind {
        "HTTPRoute" => {
            for route in &mut translation.status.routes {
                if route.namespace != origin.namespace || route.name != origin.name {
                    continue;
                }
                // Only where the route is accepted: a refusing parent's status stands.
                let accepted = route
                    .parents
                    .iter_mut()
                    .filter(|p| p.conditions.first().is_some_and(|c| c.status));
                for parent in accepted {
                    match parent
                        .conditions
                        .iter_mut()
                        .find(|c| c.kind == "PartiallyInvalid")
                    {
                        Some(c) if !c.message.contains(&text) => {
                            c.message = format!("{}; {text}", c.message)
                        }
                        Some(_) => {}
                        None => parent.conditions.push(Condition::new(
                            "PartiallyInvalid",
                            true,
                            "UnsupportedValue",
                            text.clone(),
                        )),
                    }
                }
            }
        }
        _ => {
            for ingress in &mut translation.status.ingresses {
                if ingress.namespace == origin.namespace
                    && ingress.name == origin.name
                    && !ingress.problems.contains(&text)
                {
                    ingress.problems.push(text.clone());
                }
            }
        }
    }
    true
}
