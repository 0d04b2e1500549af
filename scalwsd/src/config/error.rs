//! A configuration error as the user sees it: `FILE:LINE:COLUMN: key.path: message`.

use std::fmt;

use serde_saphyr::Location;

/// One thing wrong with a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as named on the command line.
    pub file: String,
    /// 1-based line; 0 when unknown.
    pub line: u64,
    /// 1-based column; 0 when unknown.
    pub column: u64,
    /// Where in the document: `applications[0].routes[2].static.root`.
    pub path: String,
    /// What is wrong, with a hint where one helps.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Every error found in one file, in document order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors with the file name filled in.
pub(crate) struct Errors {
    file: String,
    list: Vec<ConfigError>,
}

impl Errors {
    pub(crate) fn new(file: &str) -> Self {
        Self {
            file: file.to_owned(),
            list: Vec::new(),
        }
    }

    pub(crate) fn at(
        &mut self,
        location: &Location,
        path: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.list.push(ConfigError {
            file: self.file.clone(),
            line: location.line(),
            column: location.column(),
            path: path.into(),
            message: message.into(),
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn into_result<T>(self, value: T) -> Result<T, ConfigErrors> {
        if self.list.is_empty() {
            Ok(value)
        } else {
            Err(self.finish())
        }
    }

    /// The errors in document order.
    pub(crate) fn finish(mut self) -> ConfigErrors {
        self.list.sort_by_key(|e| (e.line, e.column));
        ConfigErrors(self.list)
    }
}

/// ` (did you mean "x"?)` when one of `known` is close to `wrong`, else nothing.
pub(crate) fn did_you_mean<'a>(wrong: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    known
        .into_iter()
        .map(|k| (strsim::jaro_winkler(wrong, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| format!(" (did you mean \"{k}\"?)"))
        .unwrap_or_default()
}
