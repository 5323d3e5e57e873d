//! The heap's malloc arenas capped at process start.
//!
//! glibc gives threads malloc arenas of their own, up to 8 per core, and keeps the memory freed
//! inside an arena for reuse rather than returning it to the system. A burst's work spread over
//! the runtime's threads leaves each arena holding what its busiest moment allocated, so the
//! heap steps up at every burst and levels only when every arena has seen its busiest moment:
//! about 140 MiB outside SQLite after eight bursts with glibc's default (16 arenas on two
//! cores), 30–50 MiB with two, and the same latency (docs/RELIABILITY.md, "The bursts and the
//! heap: the allocator, not a leak").
//!
//! [`cap_malloc_arenas`] sets the cap ([`DEFAULT_ARENAS`]) unless the operator chose one through
//! glibc's own environment: `MALLOC_ARENA_MAX=N` (or `GLIBC_TUNABLES=glibc.malloc.arena_max=N`),
//! which glibc applies itself; then this leaves malloc alone. `MALLOC_ARENA_MAX=16` on two cores
//! is glibc's default (8 per core). Elsewhere than glibc (musl, macOS) it does nothing.

/// The arenas the platform's binaries run with unless `MALLOC_ARENA_MAX` says otherwise.
pub const DEFAULT_ARENAS: i32 = 2;

/// The cap to set, given the values of `MALLOC_ARENA_MAX` and `GLIBC_TUNABLES`: none when the
/// operator named one in either (whatever the value: glibc reads it, or ignores a value it does
/// not take, as it would without this), [`DEFAULT_ARENAS`] otherwise.
fn arenas_to_set(arena_max: Option<&str>, tunables: Option<&str>) -> Option<i32> {
    let tuned =
        tunables.is_some_and(|t| t.split(':').any(|entry| entry.trim_start().starts_with("glibc.malloc.arena_max")));
    (arena_max.is_none() && !tuned).then_some(DEFAULT_ARENAS)
}

/// Caps glibc's malloc arenas at [`DEFAULT_ARENAS`] unless `MALLOC_ARENA_MAX` (or the
/// `glibc.malloc.arena_max` tunable) is set, in which case glibc has applied that value itself
/// and this does nothing. Call it first in `main`, before any thread is started (the async
/// runtime's included): a thread that has already taken an arena of its own keeps it. A no-op
/// where the C library is not glibc.
pub fn cap_malloc_arenas() {
    let arena_max = std::env::var_os("MALLOC_ARENA_MAX");
    let tunables = std::env::var_os("GLIBC_TUNABLES");
    let Some(arenas) = arenas_to_set(
        arena_max.as_ref().map(|v| v.to_str().unwrap_or("")),
        tunables.as_ref().map(|v| v.to_str().unwrap_or("")),
    ) else {
        return;
    };
    set_arena_max(arenas);
}

/// The async runtime a binary's `main` runs on (multi-threaded, I/O and time enabled, as
/// `#[tokio::main]` builds it), made after [`cap_malloc_arenas`] so its threads share the capped
/// arenas.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    cap_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: i32) {
    // SAFETY: mallopt only changes a malloc parameter; M_ARENA_MAX limits the arenas created from
    // now on. It returns 0 on an error, which leaves malloc as it was: nothing to do about it.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: i32) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_at_the_default_when_the_operator_named_no_cap() {
        assert_eq!(arenas_to_set(None, None), Some(DEFAULT_ARENAS));
        assert_eq!(arenas_to_set(None, Some("glibc.malloc.tcache_count=0")), Some(DEFAULT_ARENAS));
        assert_eq!(arenas_to_set(None, Some("")), Some(DEFAULT_ARENAS));
    }

    #[test]
    fn leaves_malloc_alone_when_malloc_arena_max_is_set() {
        assert_eq!(arenas_to_set(Some("16"), None), None);
        assert_eq!(arenas_to_set(Some("2"), None), None);
        assert_eq!(arenas_to_set(Some(""), None), None);
        assert_eq!(arenas_to_set(Some("16"), Some("glibc.malloc.arena_max=4")), None);
    }

    #[test]
    fn leaves_malloc_alone_when_the_arena_max_tunable_is_set() {
        assert_eq!(arenas_to_set(None, Some("glibc.malloc.arena_max=8")), None);
        assert_eq!(arenas_to_set(None, Some("glibc.malloc.tcache_count=0:glibc.malloc.arena_max=8")), None);
    }
}
