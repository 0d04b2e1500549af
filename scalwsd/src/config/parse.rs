//! YAML text to [`File`], with parse errors turned into `FILE:LINE:COLUMN: path: message`.

use super::error::{ConfigError, did_you_mean};
use super::schema::File;

/// Parses the document; on failure, the one error serde stopped at.
///
/// The parser's default budget (250,000 nodes, a million events) is raised:
/// a configuration that `scalwsd translate` or the controller makes from a
/// large cluster (10,000 routes) passes it several times over. Anchors and
/// aliases keep their limits, which are what stop a YAML bomb.
pub(crate) fn parse(file_name: &str, text: &str) -> Result<File, ConfigError> {
    let mut path = String::new();
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: 50_000_000,
            max_events: 200_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
    };
    let parsed =
        serde_saphyr::with_deserializer_from_str_with_options(text, options, |deserializer| {
            serde_path_to_error::deserialize::<_, File>(deserializer).map_err(|error| {
                path = error.path().to_string();
                error.into_inner()
            })
        });
    parsed.map_err(|error| {
        let (line, column) = error
            .location()
            .map_or((0, 0), |location| (location.line(), location.column()));
        let raw = error.without_snippet().to_string();
        ConfigError {
            file: file_name.to_owned(),
            line,
            column,
            path: clean_path(&path),
            message: humanise(strip_position(&raw)),
        }
    })
}

/// `Spanned` shows up as a `.value` step in serde's path; users never wrote it.
fn clean_path(path: &str) -> String {
    let path = path.replace(".value[", "[").replace(".value.", ".");
    let path = path.strip_suffix(".value").unwrap_or(&path);
    if path == "." || path == "?" {
        String::new()
    } else {
        path.to_owned()
    }
}

/// The position is printed in front already.
fn strip_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(at) if message[at..].contains(", column ") => &message[..at],
        _ => message,
    }
}

/// serde's wording, in the words of this file's docs.
fn humanise(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (wrong, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known: Vec<&str> = expected
            .trim_start_matches(", expected one of ")
            .trim_start_matches(", expected ")
            .split(", ")
            .map(|k| k.trim_matches('`'))
            .filter(|k| !k.is_empty())
            .collect();
        let hint = did_you_mean(wrong, known.iter().copied());
        let hint = if hint.is_empty() && !known.is_empty() {
            format!(" (expected one of: {})", known.join(", "))
        } else {
            hint
        };
        return format!("unknown key \"{wrong}\"{hint}");
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let name = rest.trim_end_matches('`');
        return format!("missing key \"{name}\"");
    }
    if let Some(kind) = message.strip_prefix("invalid ")
        && matches!(kind, "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64")
    {
        return "expected a whole number".to_owned();
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spanned_steps_are_removed_from_paths() {
        assert_eq!(clean_path("workers.value"), "workers");
        assert_eq!(
            clean_path("applications.value[0].name.value"),
            "applications[0].name"
        );
        assert_eq!(clean_path("."), "");
    }

    #[test]
    fn a_generated_file_larger_than_the_parsers_default_budget_parses() {
        // 30,000 routes: about 270,000 nodes, past serde-saphyr's default
        // 250,000, as `scalwsd translate` makes of a large cluster.
        let mut text = String::from(
            "listeners: [{ name: http, address: 127.0.0.1:0 }]\napplications:\n  - name: a\n    domains: [a.example]\n    routes:\n",
        );
        for i in 0..30_000 {
            text.push_str(&format!(
                "      - {{ path: /p{i}, respond: {{ status: 200, body: x }} }}\n"
            ));
        }
        let file = parse("big.yaml", &text).expect("parses");
        assert_eq!(file.applications[0].value.routes.len(), 30_000);
    }

    #[test]
    fn unknown_keys_get_a_hint() {
        assert_eq!(
            humanise("unknown field `adress`, expected one of `name`, `address`, `protocol`"),
            "unknown key \"adress\" (did you mean \"address\"?)"
        );
        assert_eq!(
            humanise("unknown field `zzz`, expected `name`"),
            "unknown key \"zzz\" (expected one of: name)"
        );
    }
}
