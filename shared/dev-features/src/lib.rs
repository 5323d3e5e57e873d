//! Nothing but features: see this crate's `Cargo.toml`. No shipped build depends on it.
