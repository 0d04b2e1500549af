//! Reading manifests from files: YAML (several documents per file, `kind:
//! List` included) and JSON, into typed [`Resources`]. Every problem is
//! reported as `FILE:LINE:COLUMN: what is wrong`; an unknown field is one.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::resources::Resources;

/// A manifest that cannot be read, with its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    /// The file, as given.
    pub file: String,
    /// 1-based; 0 when the file could not be read at all.
    pub line: usize,
    /// 1-based.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

/// What reading found besides resources: documents of kinds that are not read.
#[derive(Clone, Debug, Default)]
pub struct Skipped(pub Vec<String>);

/// Reads every path: a file, or a directory's `.yaml`, `.yml` and `.json`
/// files (recursively, in name order).
pub fn read_paths(paths: &[PathBuf], out: &mut Resources) -> Result<Skipped, Vec<ManifestError>> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        collect(path, &mut files, &mut errors);
    }
    let mut skipped = Skipped::default();
    for file in files {
        let label = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Ok(text) => match read(&label, &text, out) {
                Ok(mut s) => skipped.0.append(&mut s.0),
                Err(mut e) => errors.append(&mut e),
            },
            Err(error) => errors.push(ManifestError {
                file: label,
                line: 0,
                column: 0,
                message: format!("cannot read the file: {error}"),
            }),
        }
    }
    if errors.is_empty() {
        Ok(skipped)
    } else {
        Err(errors)
    }
}

fn collect(path: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<ManifestError>) {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(path) {
            Ok(dir) => dir.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(error) => {
                errors.push(ManifestError {
                    file: path.display().to_string(),
                    line: 0,
                    column: 0,
                    message: format!("cannot read the directory: {error}"),
                });
                return;
            }
        };
        entries.sort();
        for entry in entries {
            let manifest = entry
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
            if entry.is_dir() || manifest {
                collect(&entry, files, errors);
            }
        }
    } else {
        files.push(path.to_owned());
    }
}

/// Reads one file's text (YAML, or JSON, which YAML includes) into `out`.
pub fn read_str(
    file: &str,
    text: &str,
    out: &mut Resources,
) -> Result<Skipped, Vec<ManifestError>> {
    read(file, text, out)
}

fn read(file: &str, text: &str, out: &mut Resources) -> Result<Skipped, Vec<ManifestError>> {
    let mut errors = Vec::new();
    let mut skipped = Skipped::default();
    let json = file.ends_with(".json");
    for (start, chunk) in documents(text, json) {
        let at = |line: usize, column: usize, message: String| ManifestError {
            file: file.to_owned(),
            line: start + line.max(1) - 1,
            column: column.max(1),
            message,
        };
        let value: Value = if json {
            match serde_json::from_str(chunk) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(at(e.line(), e.column(), e.to_string()));
                    continue;
                }
            }
        } else {
            match serde_saphyr::from_str::<Option<Value>>(chunk) {
                Ok(Some(v)) => v,
                Ok(None) => continue,
                Err(e) => {
                    let (line, column) = position(&e);
                    errors.push(at(line, column, message(&e)));
                    continue;
                }
            }
        };
        if value.is_null() {
            continue;
        }
        let doc = Document {
            file,
            start,
            chunk,
            json,
        };
        if let Err(e) = doc.add(&value, None, out, &mut skipped) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(skipped)
    } else {
        Err(errors)
    }
}

/// `(first line, text)` of each document: a JSON file is one; YAML splits at `---`.
fn documents(text: &str, json: bool) -> Vec<(usize, &str)> {
    if json {
        return vec![(1, text)];
    }
    let mut out = Vec::new();
    let mut start_byte = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end();
        if bare == "---" || bare.starts_with("--- ") || bare == "..." {
            out.push((start_line, &text[start_byte..offset]));
            start_byte = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    out.push((start_line, &text[start_byte..]));
    out
}

fn position(error: &serde_saphyr::Error) -> (usize, usize) {
    error.location().map_or((1, 1), |l| {
        (
            usize::try_from(l.line()).unwrap_or(1),
            usize::try_from(l.column()).unwrap_or(1),
        )
    })
}

/// The parser's message, without the snippet and the position printed in front already.
fn message(error: &serde_saphyr::Error) -> String {
    let raw = error.without_snippet().to_string();
    let text = raw.lines().next().unwrap_or("");
    match text.rfind(" at line ") {
        Some(at) if text[at..].contains(", column ") => text[..at].to_owned(),
        _ => text.to_owned(),
    }
}

struct Document<'a> {
    file: &'a str,
    start: usize,
    chunk: &'a str,
    json: bool,
}

impl Document<'_> {
    fn error(&self, line: usize, column: usize, message: String) -> ManifestError {
        ManifestError {
            file: self.file.to_owned(),
            line: self.start + line.max(1) - 1,
            column: column.max(1),
            message,
        }
    }

    /// Adds `value` (the whole document, or `item` of a List) to `out`.
    fn add(
        &self,
        value: &Value,
        item: Option<usize>,
        out: &mut Resources,
        skipped: &mut Skipped,
    ) -> Result<(), ManifestError> {
        let api = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        let prefix = item.map(|i| format!("items[{i}]: ")).unwrap_or_default();
        if api.is_empty() || kind.is_empty() {
            return Err(self.error(
                1,
                1,
                format!("{prefix}a manifest needs apiVersion and kind"),
            ));
        }
        let (group, version) = api.split_once('/').unwrap_or(("", api));
        match (group, kind) {
            ("", "List") | ("", "ServiceList") | ("", "SecretList") => {
                let items = value
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for (i, item) in items.iter().enumerate() {
                    self.add(item, Some(i), out, skipped)?;
                }
                return Ok(());
            }
            ("gateway.networking.k8s.io", "GatewayClass") if version == "v1" => {
                out.gateway_classes.push(self.typed(value, item)?)
            }
            ("gateway.networking.k8s.io", "Gateway") if version == "v1" => {
                out.gateways.push(self.typed(value, item)?)
            }
            ("gateway.networking.k8s.io", "HTTPRoute") if version == "v1" => {
                out.http_routes.push(self.typed(value, item)?)
            }
            ("gateway.networking.k8s.io", "ReferenceGrant")
                if version == "v1" || version == "v1beta1" =>
            {
                // The two versions have one schema; read v1beta1 as v1.
                let mut value = value.clone();
                value["apiVersion"] = Value::from("gateway.networking.k8s.io/v1");
                out.reference_grants.push(self.typed(&value, item)?)
            }
            ("networking.k8s.io", "Ingress") if version == "v1" => {
                out.ingresses.push(self.typed(value, item)?)
            }
            ("networking.k8s.io", "IngressClass") if version == "v1" => {
                out.ingress_classes.push(self.typed(value, item)?)
            }
            ("", "Service") if version == "v1" => out.services.push(self.typed(value, item)?),
            ("", "Secret") if version == "v1" => out.secrets.push(self.typed(value, item)?),
            ("", "Namespace") if version == "v1" => out.namespaces.push(self.typed(value, item)?),
            ("discovery.k8s.io", "EndpointSlice") if version == "v1" => {
                out.endpoint_slices.push(self.typed(value, item)?)
            }
            (
                "gateway.networking.k8s.io",
                "GatewayClass" | "Gateway" | "HTTPRoute" | "ReferenceGrant",
            )
            | ("networking.k8s.io" | "extensions", "Ingress" | "IngressClass")
            | ("discovery.k8s.io", "EndpointSlice")
            | ("", "Service" | "Secret" | "Namespace") => {
                return Err(self.error(
                    1,
                    1,
                    format!("{prefix}{kind} {api} is not supported{}", newer(kind)),
                ));
            }
            _ => skipped.0.push(format!(
                "{}:{}: {kind} ({api}) is not read; skipped",
                self.file, self.start
            )),
        }
        Ok(())
    }

    /// The typed resource, with the line of a type error when the YAML
    /// parser can give it, and unknown fields refused.
    fn typed<T: DeserializeOwned + Serialize>(
        &self,
        value: &Value,
        item: Option<usize>,
    ) -> Result<T, ManifestError> {
        let prefix = item.map(|i| format!("items[{i}].")).unwrap_or_default();
        // From the parsed value (one YAML parse per document); only when that
        // fails is the document parsed again, typed, for the error's line.
        let typed: T = match serde_path_to_error::deserialize(value.clone()) {
            Ok(typed) => typed,
            Err(e) if item.is_none() && !self.json => {
                return Err(self.located::<T>(&format!("{}: {}", e.path(), e.inner())));
            }
            Err(e) => return Err(self.error(1, 1, format!("{prefix}{}: {}", e.path(), e.inner()))),
        };
        let back = serde_json::to_value(&typed).map_err(|e| self.error(1, 1, e.to_string()))?;
        if let Some(path) = unknown_field(value, &back, String::new()) {
            let key = path.rsplit('.').next().unwrap_or(&path).to_owned();
            let (line, column) = self.find_key(&key);
            return Err(self.error(
                line,
                column,
                format!("{prefix}{path}: unknown field \"{key}\""),
            ));
        }
        Ok(typed)
    }

    /// The error of parsing this document's YAML as `T`, with its line and
    /// column (`fallback`, at the document's start, if that parse succeeds).
    fn located<T: DeserializeOwned>(&self, fallback: &str) -> ManifestError {
        let mut path = String::new();
        let parsed = serde_saphyr::with_deserializer_from_str(self.chunk, |deserializer| {
            serde_path_to_error::deserialize::<_, T>(deserializer).map_err(|error| {
                path = error.path().to_string();
                error.into_inner()
            })
        });
        match parsed {
            Ok(_) => self.error(1, 1, fallback.to_owned()),
            Err(e) => {
                let (line, column) = position(&e);
                let at = if path.is_empty() || path == "." {
                    String::new()
                } else {
                    format!("{path}: ")
                };
                self.error(line, column, format!("{at}{}", message(&e)))
            }
        }
    }

    /// The line and column of the first `key:` in the document, else its start.
    fn find_key(&self, key: &str) -> (usize, usize) {
        let needle = if self.json {
            format!("\"{key}\"")
        } else {
            format!("{key}:")
        };
        for (i, line) in self.chunk.lines().enumerate() {
            let trimmed = line.trim_start().trim_start_matches("- ");
            if trimmed.starts_with(&needle) || (self.json && line.contains(&needle)) {
                let column = line.find(key).map_or(1, |c| c + 1 - usize::from(self.json));
                return (i + 1, column);
            }
        }
        (1, 1)
    }
}

/// Which version to use instead, for the kinds that are read.
fn newer(kind: &str) -> &'static str {
    match kind {
        "Ingress" | "IngressClass" => " (use networking.k8s.io/v1)",
        "GatewayClass" | "Gateway" | "HTTPRoute" | "ReferenceGrant" => {
            " (use gateway.networking.k8s.io/v1)"
        }
        "EndpointSlice" => " (use discovery.k8s.io/v1)",
        "Service" | "Secret" | "Namespace" => " (use v1)",
        _ => "",
    }
}

/// The path of the first key in `original` that the typed value dropped.
fn unknown_field(original: &Value, back: &Value, path: String) -> Option<String> {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| {
            let here = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            match b.get(k) {
                None if !v.is_null() => Some(here),
                None => None,
                Some(w) => unknown_field(v, w, here),
            }
        }),
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| unknown_field(v, w, format!("{path}[{i}]"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn read(text: &str) -> Result<Resources, Vec<ManifestError>> {
        let mut out = Resources::default();
        read_str("m.yaml", text, &mut out).map(|_| out)
    }

    #[test]
    fn documents_lists_and_skipped_kinds() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: { name: a }\n---\n# c\n---\napiVersion: v1\nkind: List\nitems:\n  - { apiVersion: v1, kind: Namespace, metadata: { name: b } }\n  - { apiVersion: apps/v1, kind: Deployment, metadata: { name: d } }\n";
        let r = read(text).expect("reads");
        assert_eq!(r.namespaces.len(), 2);
    }

    #[test]
    fn unknown_fields_and_type_errors_are_located() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: { name: a }\n---\napiVersion: v1\nkind: Service\nmetadata: { name: s }\nspec:\n  portz: []\n";
        let errors = read(text).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "m.yaml:9:3: spec.portz: unknown field \"portz\""
        );
        let text = "apiVersion: v1\nkind: Service\nmetadata: { name: s }\nspec:\n  ports: [{ port: eighty }]\n";
        let errors = read(text).unwrap_err();
        assert_eq!(
            (errors[0].line, errors[0].file.as_str()),
            (5, "m.yaml"),
            "{}",
            errors[0]
        );
        let errors = read("kind: [\n").unwrap_err();
        assert_eq!(errors[0].line, 1, "{}", errors[0]);
        let errors =
            read("apiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata: { name: i }\n")
                .unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "m.yaml:1:1: Ingress networking.k8s.io/v1beta1 is not supported (use networking.k8s.io/v1)"
        );
    }
}
