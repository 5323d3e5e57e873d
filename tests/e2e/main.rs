//! End-to-end suites against the real `openqq` binary. One test binary, a module per area.

mod api_semantics;
mod artifacts;
mod contract;
mod dead_letters;
mod durability;
mod dynamo;
mod events;
mod front_door;
mod functions;
mod generation;
mod isolation;
mod kafka;
mod lambda;
mod lifecycle;
mod load;
mod noisy;
mod observability;
mod payloads;
mod problems;
mod records;
mod source;
mod tansu;
mod template;
mod trace;
mod ui;
mod webhooks;
