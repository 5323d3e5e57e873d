//! Paging through a listing. A leaf: it imports nothing from the rest of the core.

/// A page of a listing; `next` is an opaque cursor for the following page.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}
