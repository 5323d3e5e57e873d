//! A validation's time budget. A thread cannot be stopped from outside, so the validator looks
//! at its deadline as it goes (between stages, and per module, port, cell, constraint and IO bit
//! in the loops that grow with the input) and, once it has passed, stops with a
//! `VALIDATION_BUDGET_EXCEEDED` error finding instead of running on.

use std::time::{Duration, Instant};

use crate::report::{Finding, Location};

/// The finding code of a validation stopped by its budget: an error, so the verdict is `fail`.
pub const BUDGET_EXCEEDED: &str = "VALIDATION_BUDGET_EXCEEDED";

/// When the validation must stop; `None` runs to the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    /// A deadline `budget` after `started`, or from now when `None` (no deadline without a
    /// budget, or when it is too far away to represent).
    pub fn since(started: Option<Instant>, budget: Option<Duration>) -> Self {
        Self(budget.and_then(|b| started.unwrap_or_else(Instant::now).checked_add(b)))
    }

    pub fn passed(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() >= d)
    }
}

/// The error finding that ends a validation whose budget ran out.
pub(crate) fn exceeded(budget: Option<Duration>) -> Finding {
    let budget = budget.unwrap_or_default();
    Finding::error(
        BUDGET_EXCEEDED,
        format!(
            "validation stopped when its time budget of {} ms ran out, so the design is not accepted; the other \
             findings come from the checks that ran before that",
            budget.as_millis()
        ),
        Location::default(),
    )
}
