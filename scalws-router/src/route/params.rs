//! Parameters captured by a `pattern` route.

/// Captured pattern parameters, in order. Empty (and unallocated) for other routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(Vec<(Box<str>, Box<str>)>);

impl Params {
    /// The value captured for `name` (`id` for `/users/{id}`, `rest` for `{*rest}`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| &**key == name)
            .map(|(_, value)| &**value)
    }

    /// `(name, value)` pairs in pattern order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> {
        self.0.iter().map(|(key, value)| (&**key, &**value))
    }

    /// The number of captured parameters.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was captured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn from_matchit(params: &matchit::Params<'_, '_>) -> Self {
        if params.is_empty() {
            return Params::default();
        }
        Params(
            params
                .iter()
                .map(|(key, value)| (key.into(), value.into()))
                .collect(),
        )
    }
}
