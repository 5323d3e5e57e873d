//! Unit tests for the site checks.
