//! Examples live in this package's `examples` targets.
