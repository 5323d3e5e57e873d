//! The Kafka flags of `openqq up`, which are also the environment of a function on Lambda
//! (`OPENQQ_KAFKA_BROKERS`, `OPENQQ_MSK_CLUSTER_ARN`, …): where the event log goes, how the
//! clients authenticate, and the topic layout.
//!
//! The flags are checked against each other before anything is opened or connected, and a bad
//! or contradictory one stops the process with a sentence naming the flags to change. Turning
//! them into settings is pure ([`KafkaArgs::security`]); only the region default and the MSK
//! lookup touch the environment or the network.

use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// How the Kafka clients authenticate (the MSK listener they use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AuthArg {
    /// No TLS, no authentication (local clusters; MSK's plaintext listener).
    Plaintext,
    /// TLS, the brokers' certificates checked (MSK's TLS listener).
    Tls,
    /// SASL/SCRAM-SHA-256 over TLS.
    #[value(name = "scram-sha-256")]
    ScramSha256,
    /// SASL/SCRAM-SHA-512 over TLS (what MSK's SCRAM listener takes).
    #[value(name = "scram-sha-512")]
    ScramSha512,
    /// MSK IAM over TLS: SASL/OAUTHBEARER tokens signed with the process's AWS credentials.
    MskIam,
}

/// The Kafka flags of `openqq up`; each has an environment variable too. (No `Debug`: it holds
/// the SASL password.)
#[derive(Args, Clone)]
pub struct KafkaArgs {
    /// Put the event log on Kafka: bootstrap brokers, HOST:PORT[,HOST:PORT…]. The store and the
    /// limiter stay as chosen by their own flags.
    #[arg(long, env = "OPENQQ_KAFKA_BROKERS", conflicts_with = "msk_cluster_arn")]
    kafka_brokers: Option<String>,
    /// Put the event log on this MSK cluster (arn:aws:kafka:REGION:ACCOUNT:cluster/NAME/ID); its
    /// bootstrap brokers are looked up (GetBootstrapBrokers) for the listener --kafka-auth uses,
    /// with the AWS credentials of the environment. Topic creation defaults to off.
    #[arg(long, env = "OPENQQ_MSK_CLUSTER_ARN")]
    msk_cluster_arn: Option<String>,
    /// How the Kafka clients authenticate.
    #[arg(long, env = "OPENQQ_KAFKA_AUTH", value_enum, default_value = "plaintext")]
    kafka_auth: AuthArg,
    /// SASL/SCRAM username.
    #[arg(long, env = "OPENQQ_KAFKA_SASL_USERNAME")]
    kafka_sasl_username: Option<String>,
    /// SASL/SCRAM password. Prefer the environment variable: a flag's value shows in `ps` to
    /// every user of the machine, the environment does not.
    #[arg(long, env = "OPENQQ_KAFKA_SASL_PASSWORD", hide_env_values = true)]
    kafka_sasl_password: Option<String>,
    /// SASL/SCRAM over a plaintext listener, for local brokers only: the session is not
    /// encrypted (SCRAM still never sends the password). MSK has no such listener.
    #[arg(long, env = "OPENQQ_KAFKA_SASL_WITHOUT_TLS", conflicts_with = "msk_cluster_arn")]
    kafka_sasl_without_tls: bool,
    /// PEM file of the CA that signed the brokers' certificates (default: the system's trust
    /// store, which covers MSK).
    #[arg(long, env = "OPENQQ_KAFKA_CA_FILE")]
    kafka_ca_file: Option<PathBuf>,
    /// AWS region the MSK IAM tokens are signed for (default: the region of --msk-cluster-arn,
    /// else the AWS environment's: AWS_REGION, AWS_DEFAULT_REGION, the profile).
    #[arg(long, env = "OPENQQ_AWS_REGION")]
    aws_region: Option<String>,
    /// Partitions of each topic created on Kafka (defaults to --partitions).
    #[arg(long, env = "OPENQQ_KAFKA_TOPIC_PARTITIONS", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    kafka_topic_partitions: Option<u32>,
    /// Replication factor of each topic created on Kafka.
    #[arg(long, env = "OPENQQ_KAFKA_REPLICATION", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=32))]
    kafka_replication: u32,
    /// Create the topics on Kafka at start when missing (default: true with --kafka-brokers,
    /// false with --msk-cluster-arn, where topics are managed elsewhere).
    #[arg(long, env = "OPENQQ_KAFKA_CREATE_TOPICS", action = clap::ArgAction::Set)]
    kafka_create_topics: Option<bool>,
    /// How long Kafka may take to acknowledge a publish or answer a request.
    #[arg(long, env = "OPENQQ_KAFKA_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    kafka_timeout: Duration,
}

impl KafkaArgs {
    /// Whether the event log goes to Kafka.
    pub fn selected(&self) -> bool {
        self.kafka_brokers.is_some() || self.msk_cluster_arn.is_some()
    }

    /// Topics are created at start unless told otherwise, or unless they live on MSK.
    #[cfg(feature = "kafka")]
    fn create_topics(&self) -> bool {
        self.kafka_create_topics.unwrap_or(self.msk_cluster_arn.is_none())
    }

    /// The security flags given, for the check that they are not given without Kafka.
    fn security_flags_given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        if self.kafka_auth != AuthArg::Plaintext {
            given.push("--kafka-auth");
        }
        for (flag, set) in [
            ("--kafka-sasl-username", self.kafka_sasl_username.is_some()),
            ("--kafka-sasl-password", self.kafka_sasl_password.is_some()),
            ("--kafka-ca-file", self.kafka_ca_file.is_some()),
            ("--aws-region", self.aws_region.is_some()),
        ] {
            if set {
                given.push(flag);
            }
        }
        given
    }
}

#[cfg(feature = "kafka")]
pub use with_kafka::settings;

/// What [`settings`] returns: Kafka's settings, or (without the `kafka` feature) nothing.
#[cfg(feature = "kafka")]
pub type KafkaSettings = openqq_adapters::KafkaSettings;
#[cfg(not(feature = "kafka"))]
pub type KafkaSettings = std::convert::Infallible;

/// Both sides of an event log: where records are published and where consumers read them.
pub type LogHandles = (std::sync::Arc<dyn openqq_core::EventLog>, std::sync::Arc<dyn openqq_core::LogSource>);

/// The event log on Kafka when `settings` says so (`None` when it stays embedded). Brokers that
/// cannot be reached stop start-up with a sentence naming them.
#[cfg(feature = "kafka")]
pub async fn connect(settings: Option<KafkaSettings>) -> anyhow::Result<Option<LogHandles>> {
    use anyhow::Context;
    let Some(settings) = settings else { return Ok(None) };
    let (brokers, auth) = (settings.brokers.clone(), settings.security.auth.name());
    let log = openqq_adapters::kafka::KafkaEventLog::connect(settings)
        .await
        .with_context(|| format!("putting the event log on Kafka at {brokers}"))?;
    tracing::info!(brokers, auth, "The event log is on Kafka.");
    let log = std::sync::Arc::new(log);
    Ok(Some((log.clone(), log)))
}

#[cfg(not(feature = "kafka"))]
pub async fn connect(settings: Option<KafkaSettings>) -> anyhow::Result<Option<LogHandles>> {
    match settings {
        Some(never) => match never {},
        None => Ok(None),
    }
}

/// Without the `kafka` feature, any Kafka flag is refused.
#[cfg(not(feature = "kafka"))]
pub async fn settings(
    args: &KafkaArgs,
    _partitions: u32,
    _topics: Vec<String>,
) -> anyhow::Result<Option<std::convert::Infallible>> {
    anyhow::ensure!(
        !args.selected() && args.security_flags_given().is_empty(),
        "the Kafka flags need an openqq built with the `kafka` feature"
    );
    Ok(None)
}

#[cfg(feature = "kafka")]
mod with_kafka {
    use super::{AuthArg, KafkaArgs};
    use anyhow::{bail, Context, Result};
    use clap::ValueEnum;
    use openqq_adapters::kafka::{msk, ClusterArn, KafkaAuth, KafkaSecurity, KafkaSettings, ScramMechanism, Secret};

    /// The Kafka settings the flags ask for, checked and complete (for MSK, with the brokers
    /// looked up); `None` when the event log stays embedded.
    pub async fn settings(args: &KafkaArgs, partitions: u32, topics: Vec<String>) -> Result<Option<KafkaSettings>> {
        if !args.selected() {
            let given = args.security_flags_given();
            if !given.is_empty() {
                bail!(
                    "{} configure the Kafka event log, which needs --kafka-brokers or --msk-cluster-arn",
                    given.join(", ")
                );
            }
            return Ok(None);
        }
        let arn =
            args.msk_cluster_arn.as_deref().map(str::parse::<ClusterArn>).transpose().context("--msk-cluster-arn")?;
        let env_region = if args.kafka_auth == AuthArg::MskIam && args.aws_region.is_none() && arn.is_none() {
            msk::default_region().await
        } else {
            None
        };
        let security = args.security(arn.as_ref(), env_region)?;
        // A missing CA file or an empty password fails here, before any network call.
        security.validate()?;
        let brokers = match (&args.kafka_brokers, &arn) {
            (Some(brokers), _) => brokers.clone(),
            (None, Some(arn)) => {
                let brokers = msk::bootstrap_brokers(arn, &security.auth).await?;
                tracing::info!(cluster = %arn, brokers, auth = security.auth.name(), "Found the MSK cluster's bootstrap brokers.");
                brokers
            }
            (None, None) => unreachable!("Kafka is selected"),
        };
        let mut settings = KafkaSettings::new(brokers, topics);
        settings.security = security;
        settings.partitions = args.kafka_topic_partitions.unwrap_or(partitions);
        settings.replication = args.kafka_replication;
        settings.create_topics = args.create_topics();
        settings.timeout = args.kafka_timeout;
        settings.validate()?;
        Ok(Some(settings))
    }

    impl KafkaArgs {
        /// The security settings the flags ask for. Pure: `env_region` is the AWS environment's
        /// region, looked up by the caller when it may be needed.
        pub(super) fn security(&self, arn: Option<&ClusterArn>, env_region: Option<String>) -> Result<KafkaSecurity> {
            let auth_name = self.kafka_auth.to_possible_value().map(|v| v.get_name().to_owned()).unwrap_or_default();
            let scram = |mechanism| -> Result<KafkaAuth> {
                let Some(username) = self.kafka_sasl_username.clone() else {
                    bail!("--kafka-auth {auth_name} needs a username: set --kafka-sasl-username (OPENQQ_KAFKA_SASL_USERNAME)");
                };
                let Some(password) = self.kafka_sasl_password.clone() else {
                    bail!("--kafka-auth {auth_name} needs a password: set OPENQQ_KAFKA_SASL_PASSWORD (or --kafka-sasl-password, which shows in ps)");
                };
                Ok(KafkaAuth::Scram { mechanism, username, password: Secret::new(password) })
            };
            if let (Some(region), Some(arn)) = (&self.aws_region, arn) {
                if region != arn.region() {
                    bail!("--aws-region {region} is not the region of --msk-cluster-arn ({}); the cluster is looked up and signed for in its own region, so drop --aws-region or make them agree", arn.region());
                }
            }
            let is_scram = matches!(self.kafka_auth, AuthArg::ScramSha256 | AuthArg::ScramSha512);
            if !is_scram && (self.kafka_sasl_username.is_some() || self.kafka_sasl_password.is_some()) {
                bail!("--kafka-sasl-username and --kafka-sasl-password are for --kafka-auth scram-sha-256 or scram-sha-512, not {auth_name}");
            }
            if self.aws_region.is_some() && self.kafka_auth != AuthArg::MskIam && arn.is_none() {
                bail!("--aws-region is for --kafka-auth msk-iam or --msk-cluster-arn; with --kafka-brokers and --kafka-auth {auth_name} it has no use");
            }
            let auth = match self.kafka_auth {
                AuthArg::Plaintext => KafkaAuth::Plaintext,
                AuthArg::Tls => KafkaAuth::Tls,
                AuthArg::ScramSha256 => scram(ScramMechanism::Sha256)?,
                AuthArg::ScramSha512 => scram(ScramMechanism::Sha512)?,
                AuthArg::MskIam => {
                    let region = self.aws_region.clone().or_else(|| arn.map(|a| a.region().to_owned())).or(env_region);
                    let Some(region) = region else {
                        bail!("--kafka-auth msk-iam signs its tokens for the cluster's AWS region and none is known: set --aws-region (OPENQQ_AWS_REGION) or AWS_REGION");
                    };
                    KafkaAuth::MskIam { region }
                }
            };
            Ok(KafkaSecurity {
                auth,
                ca_file: self.kafka_ca_file.clone(),
                sasl_without_tls: self.kafka_sasl_without_tls,
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use clap::Parser;

        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            kafka: KafkaArgs,
        }

        fn parse(args: &[&str]) -> Result<KafkaArgs, clap::Error> {
            Cli::try_parse_from(std::iter::once("openqq").chain(args.iter().copied())).map(|c| c.kafka)
        }

        fn security(args: &[&str]) -> Result<KafkaSecurity> {
            let args = parse(args).unwrap();
            let arn = args.msk_cluster_arn.as_deref().map(|a| a.parse::<ClusterArn>().unwrap());
            args.security(arn.as_ref(), None)
        }

        fn refused(args: &[&str], needle: &str) {
            let message = format!("{:#}", security(args).expect_err("refused"));
            assert!(message.contains(needle), "{args:?}: {message}");
        }

        const ARN: &str = "arn:aws:kafka:eu-west-1:123456789012:cluster/openqq/abc-1";

        #[test]
        fn each_auth_flag_becomes_its_security_setting() {
            assert_eq!(security(&["--kafka-brokers", "a:1"]).unwrap(), KafkaSecurity::default());
            let tls =
                security(&["--kafka-brokers", "a:1", "--kafka-auth", "tls", "--kafka-ca-file", "/ca.pem"]).unwrap();
            assert_eq!(
                tls,
                KafkaSecurity { auth: KafkaAuth::Tls, ca_file: Some("/ca.pem".into()), sasl_without_tls: false }
            );
            let scram = security(&[
                "--kafka-brokers",
                "a:1",
                "--kafka-auth",
                "scram-sha-512",
                "--kafka-sasl-username",
                "u",
                "--kafka-sasl-password",
                "p",
            ])
            .unwrap();
            assert_eq!(
                scram.auth,
                KafkaAuth::Scram {
                    mechanism: ScramMechanism::Sha512,
                    username: "u".into(),
                    password: Secret::new("p")
                }
            );
            let iam = security(&["--msk-cluster-arn", ARN, "--kafka-auth", "msk-iam"]).unwrap();
            assert_eq!(iam.auth, KafkaAuth::MskIam { region: "eu-west-1".into() }, "the ARN's region");
            let iam =
                security(&["--kafka-brokers", "a:1", "--kafka-auth", "msk-iam", "--aws-region", "us-east-2"]).unwrap();
            assert_eq!(iam.auth, KafkaAuth::MskIam { region: "us-east-2".into() });
            let args = parse(&["--kafka-brokers", "a:1", "--kafka-auth", "msk-iam"]).unwrap();
            assert_eq!(
                args.security(None, Some("ap-south-1".into())).unwrap().auth,
                KafkaAuth::MskIam { region: "ap-south-1".into() },
                "the environment's region"
            );
        }

        #[test]
        fn scram_without_a_username_or_password_is_refused_naming_the_flag() {
            refused(
                &["--kafka-brokers", "a:1", "--kafka-auth", "scram-sha-256", "--kafka-sasl-password", "p"],
                "needs a username: set --kafka-sasl-username",
            );
            refused(
                &["--kafka-brokers", "a:1", "--kafka-auth", "scram-sha-512", "--kafka-sasl-username", "u"],
                "needs a password: set OPENQQ_KAFKA_SASL_PASSWORD",
            );
        }

        #[test]
        fn contradictory_flags_are_refused() {
            refused(
                &["--kafka-brokers", "a:1", "--kafka-sasl-username", "u"],
                "are for --kafka-auth scram-sha-256 or scram-sha-512, not plaintext",
            );
            refused(&["--kafka-brokers", "a:1", "--kafka-auth", "msk-iam"], "none is known: set --aws-region");
            refused(
                &["--kafka-brokers", "a:1", "--kafka-auth", "tls", "--aws-region", "eu-west-1"],
                "--aws-region is for --kafka-auth msk-iam",
            );
            refused(
                &["--msk-cluster-arn", ARN, "--kafka-auth", "msk-iam", "--aws-region", "us-east-1"],
                "is not the region of --msk-cluster-arn (eu-west-1)",
            );
            let both = parse(&["--kafka-brokers", "a:1", "--msk-cluster-arn", ARN]).err().expect("conflict");
            assert_eq!(both.kind(), clap::error::ErrorKind::ArgumentConflict);
        }

        #[test]
        fn an_unknown_auth_is_refused_with_the_choices() {
            let err = parse(&["--kafka-brokers", "a:1", "--kafka-auth", "scram-sha-1"])
                .err()
                .expect("unknown auth")
                .to_string();
            assert!(err.contains("scram-sha-1") && err.contains("scram-sha-512") && err.contains("msk-iam"), "{err}");
        }

        #[tokio::test]
        async fn security_flags_without_kafka_are_refused_and_msk_turns_topic_creation_off() {
            let args = parse(&["--kafka-auth", "tls", "--kafka-ca-file", "/ca.pem"]).unwrap();
            let message = settings(&args, 12, vec![]).await.unwrap_err().to_string();
            assert!(message.contains("--kafka-auth, --kafka-ca-file configure the Kafka event log, which needs --kafka-brokers or --msk-cluster-arn"), "{message}");
            assert!(settings(&parse(&[]).unwrap(), 12, vec![]).await.unwrap().is_none());

            let local = settings(&parse(&["--kafka-brokers", "a:1"]).unwrap(), 12, vec![]).await.unwrap().unwrap();
            assert!(local.create_topics);
            // (`settings` would look the MSK cluster up; that lookup is tested in the adapter
            // against a recorded response.)
            assert!(!parse(&["--msk-cluster-arn", ARN]).unwrap().create_topics());
            assert!(parse(&["--msk-cluster-arn", ARN, "--kafka-create-topics", "true"]).unwrap().create_topics());
            assert!(!parse(&["--kafka-brokers", "a:1", "--kafka-create-topics", "false"]).unwrap().create_topics());
        }

        #[test]
        fn the_password_is_hidden_from_help_and_debug_output() {
            let command = <Cli as clap::CommandFactory>::command();
            let password = command.get_arguments().find(|a| a.get_id() == "kafka_sasl_password").unwrap();
            assert!(password.is_hide_env_values_set(), "--help must not print the password from the environment");
            let help = password.get_long_help().or(password.get_help()).unwrap().to_string();
            assert!(help.contains("`ps`"), "the help says why the environment variable is better: {help}");
            let scram = security(&[
                "--kafka-brokers",
                "a:1",
                "--kafka-auth",
                "scram-sha-512",
                "--kafka-sasl-username",
                "u",
                "--kafka-sasl-password",
                "hunter2",
            ])
            .unwrap();
            assert!(!format!("{scram:?}").contains("hunter2"));
        }
    }
}
