//! [`SettingsError`]: an adapter refusing one of its settings (a broker list that is not
//! `HOST:PORT`, a CA file that is not there, a bucket name S3 would refuse), apart from
//! [`PortError`], which is about requests. It lives here, not in the core, because settings are
//! the adapters' own: the ports never see them, and the platform's flags turn this error into
//! their start-up error.

use openqq_core::{Cause, Failure, PortError};

/// A setting an adapter cannot work with, refused before any request is sent: the operator's to
/// fix, so never worth retrying. The message is a sentence an operator can act on; where the
/// refusal comes from an error (a file that cannot be read, a client that cannot be built), that
/// error is the source.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SettingsError {
    message: String,
    #[source]
    source: Option<Cause>,
}

impl SettingsError {
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), source: None }
    }

    /// A setting refused because of `cause`.
    pub fn caused_by(message: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self { message: message.into(), source: Some(cause.into()) }
    }
}

/// For the constructors that check their settings and then connect, and so answer with a port
/// error: the settings error stays one ([`PortError::Settings`], permanent), its source kept.
impl From<SettingsError> for PortError {
    fn from(e: SettingsError) -> Self {
        PortError::Settings(match e.source {
            Some(cause) => Failure::new(e.message, cause),
            None => e.message.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_setting_keeps_its_cause_and_says_only_its_sentence() {
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = SettingsError::caused_by("the CA file ca.pem cannot be read", missing);
        assert_eq!(e.to_string(), "the CA file ca.pem cannot be read");
        let source = std::error::Error::source(&e).expect("the cause is kept");
        assert_eq!(
            source.downcast_ref::<std::io::Error>().map(std::io::Error::kind),
            Some(std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn a_refused_setting_met_while_connecting_stays_a_settings_error_with_its_cause() {
        let e = PortError::from(SettingsError::new("the S3 object store needs an AWS region"));
        assert!(matches!(&e, PortError::Settings(_)), "{e:?}");
        assert_eq!(e.to_string(), "the S3 object store needs an AWS region");
        assert!(!e.is_retriable());
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = PortError::from(SettingsError::caused_by("the CA file ca.pem cannot be read", missing));
        let source = std::error::Error::source(&e).expect("the cause is kept through the port error");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
    }
}
