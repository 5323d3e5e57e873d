//! How the Kafka clients encrypt and authenticate: [`KafkaSecurity`] (an auth choice and an
//! optional CA file), its validation, and the librdkafka properties it maps to.
//!
//! The choices match MSK's listeners: plaintext (port 9092), TLS (9094), SASL/SCRAM over TLS
//! (9096) and IAM over TLS (9098). IAM is SASL/OAUTHBEARER with a token the process signs with
//! its AWS credentials; `iam.rs` makes the tokens and hands them to librdkafka.

use crate::SettingsError;
use rdkafka::config::ClientConfig;
use std::fmt;
use std::path::PathBuf;

/// A secret string, such as a SASL password. Its `Debug` never shows it, so the settings that
/// hold it can be logged whole.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself, for the one place that hands it to librdkafka.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The SASL/SCRAM hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// The name librdkafka's `sasl.mechanism` takes.
    pub fn sasl_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }
}

/// How the clients authenticate to the brokers, which also decides the listener they talk to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KafkaAuth {
    /// No TLS and no authentication: local clusters, or MSK's plaintext listener.
    #[default]
    Plaintext,
    /// TLS with the brokers' certificates checked; the client does not authenticate.
    Tls,
    /// SASL/SCRAM over TLS (on MSK the credentials live in Secrets Manager).
    Scram { mechanism: ScramMechanism, username: String, password: Secret },
    /// MSK IAM over TLS: SASL/OAUTHBEARER with a token signed by the process's AWS credentials
    /// for `region`, the cluster's region.
    MskIam { region: String },
}

impl KafkaAuth {
    /// The name an operator chooses it by (`--kafka-auth`), for messages.
    pub fn name(&self) -> &'static str {
        match self {
            KafkaAuth::Plaintext => "plaintext",
            KafkaAuth::Tls => "tls",
            KafkaAuth::Scram { mechanism: ScramMechanism::Sha256, .. } => "scram-sha-256",
            KafkaAuth::Scram { mechanism: ScramMechanism::Sha512, .. } => "scram-sha-512",
            KafkaAuth::MskIam { .. } => "msk-iam",
        }
    }

    pub fn uses_tls(&self) -> bool {
        !matches!(self, KafkaAuth::Plaintext)
    }
}

/// TLS and authentication, the same for every client of a [`KafkaEventLog`](super::KafkaEventLog).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaSecurity {
    pub auth: KafkaAuth,
    /// PEM file of the CA that signed the brokers' certificates. Unset, the system's trust store
    /// is used, which holds the public CAs MSK's certificates chain to; a private cluster with
    /// its own CA needs this.
    pub ca_file: Option<PathBuf>,
    /// SASL/SCRAM over a plaintext listener: for local brokers only (the session is not
    /// encrypted; SCRAM still never sends the password). MSK has no such listener.
    pub sasl_without_tls: bool,
}

impl KafkaSecurity {
    pub fn uses_tls(&self) -> bool {
        self.auth.uses_tls() && !self.sasl_without_tls
    }

    /// Rejects a setting that cannot work, with a sentence an operator can act on. Reads the CA
    /// file's metadata, so that a wrong path fails here rather than at the first TLS handshake.
    pub fn validate(&self) -> Result<(), SettingsError> {
        match &self.auth {
            KafkaAuth::Plaintext | KafkaAuth::Tls => {}
            KafkaAuth::Scram { mechanism, username, password } => {
                let name = mechanism.sasl_name();
                if username.trim().is_empty() {
                    return Err(invalid(format!("SASL/{name} needs a username; give the Kafka SASL username")));
                }
                if password.expose().is_empty() {
                    return Err(invalid(format!(
                        "SASL/{name} needs a password; give the Kafka SASL password for user {username:?}"
                    )));
                }
            }
            KafkaAuth::MskIam { region } => check_region(region)?,
        }
        if self.sasl_without_tls && !matches!(self.auth, KafkaAuth::Scram { .. }) {
            return Err(invalid(format!("SASL without TLS is for SCRAM auth, not {}", self.auth.name())));
        }
        if let Some(path) = &self.ca_file {
            if !self.uses_tls() {
                return Err(invalid(format!(
                    "a Kafka CA file ({}) is set but the connection is plaintext, which does not use TLS; choose tls, scram-sha-256, scram-sha-512 or msk-iam over TLS, or drop the CA file",
                    path.display()
                )));
            }
            match std::fs::metadata(path) {
                Ok(m) if m.is_file() => {}
                Ok(_) => return Err(invalid(format!("the Kafka CA file {} is not a file; give the PEM file of the CA that signed the brokers' certificates", path.display()))),
                Err(e) => {
                    return Err(SettingsError::caused_by(
                        format!(
                            "the Kafka CA file {} cannot be read ({e}); give the PEM file of the CA that signed the brokers' certificates",
                            path.display()
                        ),
                        e,
                    ))
                }
            }
        }
        Ok(())
    }

    /// The librdkafka properties of this choice. MSK IAM also needs the client context that
    /// signs tokens (`iam.rs`).
    pub(super) fn apply(&self, c: &mut ClientConfig) {
        match &self.auth {
            KafkaAuth::Plaintext => {
                c.set("security.protocol", "plaintext");
            }
            KafkaAuth::Tls => {
                c.set("security.protocol", "ssl");
            }
            KafkaAuth::Scram { mechanism, username, password } => {
                c.set("security.protocol", if self.sasl_without_tls { "sasl_plaintext" } else { "sasl_ssl" })
                    .set("sasl.mechanism", mechanism.sasl_name())
                    .set("sasl.username", username)
                    .set("sasl.password", password.expose());
            }
            KafkaAuth::MskIam { .. } => {
                c.set("security.protocol", "sasl_ssl").set("sasl.mechanism", "OAUTHBEARER");
            }
        }
        if let Some(path) = &self.ca_file {
            c.set("ssl.ca.location", path.to_string_lossy());
        }
    }
}

/// An AWS region name: `eu-west-1`, `us-gov-east-1`, `ap-southeast-5`.
fn check_region(region: &str) -> Result<(), SettingsError> {
    let parts: Vec<&str> = region.split('-').collect();
    let letters = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase());
    let ok = parts.len() >= 3
        && parts[0].len() == 2
        && parts[..parts.len() - 1].iter().all(|p| letters(p))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty();
    if ok {
        Ok(())
    } else if region.is_empty() {
        Err(invalid("MSK IAM auth signs its tokens for the cluster's AWS region, and none is set; give the region (e.g. eu-west-1)".into()))
    } else {
        Err(invalid(format!("{region:?} is not an AWS region name like eu-west-1")))
    }
}

fn invalid(message: String) -> SettingsError {
    SettingsError::new(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn props(security: &KafkaSecurity) -> BTreeMap<String, String> {
        let mut c = ClientConfig::new();
        security.apply(&mut c);
        ["security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location"]
            .into_iter()
            .filter_map(|k| c.get(k).map(|v| (k.to_owned(), v.to_owned())))
            .collect()
    }

    fn scram(mechanism: ScramMechanism, username: &str, password: &str) -> KafkaSecurity {
        KafkaSecurity {
            auth: KafkaAuth::Scram { mechanism, username: username.into(), password: Secret::new(password) },
            ca_file: None,
            sasl_without_tls: false,
        }
    }

    fn expect_invalid(security: &KafkaSecurity, needle: &str) {
        match security.validate() {
            Err(e) => assert!(e.to_string().contains(needle), "{e:?} should mention {needle:?}"),
            other => panic!("{security:?} should be refused as invalid, got {other:?}"),
        }
    }

    #[test]
    fn each_auth_maps_to_its_librdkafka_protocol_and_mechanism() {
        let map = |pairs: &[(&str, &str)]| {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()
        };
        assert_eq!(props(&KafkaSecurity::default()), map(&[("security.protocol", "plaintext")]));
        assert_eq!(
            props(&KafkaSecurity { auth: KafkaAuth::Tls, ca_file: None, sasl_without_tls: false }),
            map(&[("security.protocol", "ssl")])
        );
        assert_eq!(
            props(&scram(ScramMechanism::Sha512, "alice", "pw")),
            map(&[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "alice"),
                ("sasl.password", "pw")
            ])
        );
        assert_eq!(props(&scram(ScramMechanism::Sha256, "a", "b"))["sasl.mechanism"], "SCRAM-SHA-256");
        let local = KafkaSecurity { sasl_without_tls: true, ..scram(ScramMechanism::Sha512, "a", "b") };
        assert_eq!(props(&local)["security.protocol"], "sasl_plaintext");
        assert!(local.validate().is_ok());
        let tls = KafkaSecurity { auth: KafkaAuth::Tls, ca_file: None, sasl_without_tls: true };
        assert!(tls.validate().unwrap_err().to_string().contains("for SCRAM auth"));
        assert_eq!(
            props(&KafkaSecurity {
                auth: KafkaAuth::MskIam { region: "eu-west-1".into() },
                ca_file: None,
                sasl_without_tls: false
            }),
            map(&[("security.protocol", "sasl_ssl"), ("sasl.mechanism", "OAUTHBEARER")])
        );
        let with_ca =
            KafkaSecurity { auth: KafkaAuth::Tls, ca_file: Some("/etc/kafka/ca.pem".into()), sasl_without_tls: false };
        assert_eq!(props(&with_ca)["ssl.ca.location"], "/etc/kafka/ca.pem");
    }

    #[test]
    fn the_mapped_properties_are_accepted_by_librdkafka() {
        // Property names and values librdkafka does not know, or a mechanism it was built
        // without (SCRAM and OAUTHBEARER need its OpenSSL build), fail client creation.
        use rdkafka::producer::BaseProducer;
        for security in [
            KafkaSecurity::default(),
            KafkaSecurity { auth: KafkaAuth::Tls, ca_file: None, sasl_without_tls: false },
            scram(ScramMechanism::Sha256, "a", "b"),
            scram(ScramMechanism::Sha512, "a", "b"),
            KafkaSecurity {
                auth: KafkaAuth::MskIam { region: "eu-west-1".into() },
                ca_file: None,
                sasl_without_tls: false,
            },
        ] {
            let mut c = ClientConfig::new();
            c.set("bootstrap.servers", "127.0.0.1:1");
            security.apply(&mut c);
            let created: Result<BaseProducer, _> = c.create();
            assert!(created.is_ok(), "{}: {:?}", security.auth.name(), created.err());
        }
    }

    #[test]
    fn scram_without_a_username_or_password_is_refused() {
        expect_invalid(&scram(ScramMechanism::Sha256, "", "pw"), "needs a username");
        expect_invalid(&scram(ScramMechanism::Sha512, "alice", ""), "needs a password");
        assert!(scram(ScramMechanism::Sha512, "alice", "pw").validate().is_ok());
    }

    #[test]
    fn msk_iam_without_a_valid_region_is_refused() {
        let iam = |r: &str| KafkaSecurity {
            auth: KafkaAuth::MskIam { region: r.into() },
            ca_file: None,
            sasl_without_tls: false,
        };
        expect_invalid(&iam(""), "none is set");
        for bad in ["eu-west", "EU-WEST-1", "euwest1", "eu-west-1a", "e-west-1", "eu--1"] {
            expect_invalid(&iam(bad), "is not an AWS region name");
        }
        for good in ["eu-west-1", "us-gov-west-1", "ap-southeast-5", "cn-north-1"] {
            assert!(iam(good).validate().is_ok(), "{good}");
        }
    }

    #[test]
    fn a_ca_file_must_exist_and_needs_tls() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing-ca.pem");
        expect_invalid(
            &KafkaSecurity { auth: KafkaAuth::Tls, ca_file: Some(missing), sasl_without_tls: false },
            "cannot be read",
        );
        expect_invalid(
            &KafkaSecurity { auth: KafkaAuth::Tls, ca_file: Some(dir.path().to_owned()), sasl_without_tls: false },
            "is not a file",
        );
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
        assert!(KafkaSecurity { auth: KafkaAuth::Tls, ca_file: Some(ca.clone()), sasl_without_tls: false }
            .validate()
            .is_ok());
        expect_invalid(
            &KafkaSecurity { auth: KafkaAuth::Plaintext, ca_file: Some(ca.clone()), sasl_without_tls: false },
            "does not use TLS",
        );
        expect_invalid(
            &KafkaSecurity {
                sasl_without_tls: true,
                ca_file: Some(ca),
                ..scram(ScramMechanism::Sha512, "alice", "pw")
            },
            "does not use TLS",
        );
    }

    #[test]
    fn a_password_never_appears_in_debug_output() {
        let security = scram(ScramMechanism::Sha256, "alice", "hunter2-very-secret");
        for shown in
            [format!("{security:?}"), format!("{security:#?}"), format!("{:?}", Secret::new("hunter2-very-secret"))]
        {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains("redacted"), "{shown}");
        }
        assert!(format!("{security:?}").contains("alice"), "the username is not a secret");
        // rdkafka's own Debug of the client config leaves the password out as well.
        let mut c = ClientConfig::new();
        security.apply(&mut c);
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
