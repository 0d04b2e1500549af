//! Benchmarks for ScalWS.
