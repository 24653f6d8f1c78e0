//! The OTLP destination's client against receivers: loopback ones that answer as each test
//! scripts (retries, splits, SigV4) and the benches' real ones (VictoriaMetrics, Prometheus).
//! One test binary for the three.

mod common;
mod receivers;
mod retry;
mod sigv4;
