//! The OpenAI-compatible backend against the scripted test server: one binary, a module per area.

mod helpers;

mod breaker;
mod control;
mod corpus;
mod limits;
mod output;
mod repair;
mod retries;
mod secrets;
