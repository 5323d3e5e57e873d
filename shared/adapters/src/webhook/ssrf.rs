//! Where a webhook may point: only at public addresses, so a tenant cannot make the platform
//! call its own network (the cloud metadata service at 169.254.169.254, a database on 10.0.0.5,
//! an admin port on 127.0.0.1).
//!
//! Two checks. At registration [`check_target_url`] refuses what is wrong on its face: a scheme
//! other than http(s), a literal address outside the public ranges, a name that is local by
//! definition (`localhost`, `*.internal`, a single label). At connect time [`GuardedResolver`]
//! resolves names with the system resolver and refuses the connection unless every address is
//! public; the client connects to exactly the addresses it checked, so a name that resolved to a
//! public address at registration and to 127.0.0.1 later (DNS rebinding) is still refused. A URL
//! with a literal address never reaches a resolver, so [`check_target_url`] runs again before each
//! attempt.
//!
//! `allow_private` (development only: a receiver on the same machine) turns both checks off
//! apart from the scheme.
//!
//! The rules themselves are the core's ([`openqq_core::webhook::target`]), so the API checks
//! registrations without linking an HTTP client.

pub use openqq_core::webhook::target::{check_target_url, check_url_host, is_public};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};

/// Why a connection was refused before it was made. The texts reach the tenant (the delivery
/// history shows the attempt's error), so they never name an address the platform resolved: a
/// tenant could otherwise map the internal network by registering internal names. The address
/// is logged for the operator instead.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{host} resolves to a private address, which is not a public address; webhooks reach public hosts only")]
    NotPublic {
        host: String,
        /// For the operator's log only; never in the text.
        address: IpAddr,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
    #[error("resolving {host} failed")]
    Lookup {
        host: String,
        #[source]
        source: std::io::Error,
    },
}

/// The webhook client's resolver: the system resolver, then every address checked with
/// [`is_public`] (unless `allow_private`). One address that is not public refuses the name, so
/// a name cannot slip an internal address in among public ones.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl GuardedResolver {
    /// The addresses of `host` the client may connect to, or why it may not.
    pub async fn lookup(self, host: &str) -> Result<Vec<SocketAddr>, ResolveError> {
        let lookup = |source| ResolveError::Lookup { host: host.to_owned(), source };
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await.map_err(lookup)?.collect();
        if addrs.is_empty() {
            return Err(ResolveError::NoAddress { host: host.to_owned() });
        }
        if !self.allow_private {
            if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
                tracing::info!(host, address = %bad.ip(), "A webhook host resolves to an address that is not public; the connection was refused.");
                return Err(ResolveError::NotPublic { host: host.to_owned(), address: bad.ip() });
            }
        }
        Ok(addrs)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = *self;
        Box::pin(async move {
            let addrs = this.lookup(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_resolver_refuses_a_name_that_resolves_to_loopback_unless_private_targets_are_allowed() {
        let refused = GuardedResolver { allow_private: false }.lookup("localhost").await;
        assert!(matches!(refused, Err(ResolveError::NotPublic { .. })), "{refused:?}");
        assert!(refused.unwrap_err().to_string().contains("not a public address"));
        let allowed = GuardedResolver { allow_private: true }.lookup("localhost").await.unwrap();
        assert!(allowed.iter().all(|a| a.ip().is_loopback()), "{allowed:?}");
    }

    /// The refusal reaches the tenant's delivery history: it says the name resolves to a private
    /// address, never which one (that would map the platform's own network for the tenant).
    #[tokio::test]
    async fn a_refused_name_is_said_to_resolve_to_a_private_address_without_the_address() {
        let refused = GuardedResolver { allow_private: false }.lookup("localhost").await.unwrap_err();
        let said = refused.to_string();
        assert!(said.contains("localhost resolves to a private address"), "{said}");
        for address in ["127.0.0.1", "::1", "127."] {
            assert!(!said.contains(address), "{said}");
        }
    }
}
