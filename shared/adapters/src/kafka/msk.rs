//! Finding an MSK cluster's bootstrap brokers from its ARN (the Kafka API's
//! `GetBootstrapBrokers`), for the listener that matches the auth: IAM, SASL/SCRAM, TLS or
//! plaintext. The AWS credentials and settings come from the environment as for any AWS SDK
//! client (`aws-config`); the call goes to the cluster's own region, read from its ARN.

use super::security::{KafkaAuth, ScramMechanism};
use crate::SettingsError;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_kafka::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kafka::operation::get_bootstrap_brokers::GetBootstrapBrokersOutput;
use openqq_core::ports::PortResult;
use openqq_core::{Failure, PortError};
use std::fmt;
use std::str::FromStr;

/// An MSK cluster ARN: `arn:PARTITION:kafka:REGION:ACCOUNT:cluster/NAME/ID`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterArn {
    arn: String,
    region: String,
}

impl ClusterArn {
    pub fn as_str(&self) -> &str {
        &self.arn
    }

    /// The cluster's region: where the lookup goes, and what IAM tokens are signed for.
    pub fn region(&self) -> &str {
        &self.region
    }
}

impl fmt::Display for ClusterArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.arn)
    }
}

impl FromStr for ClusterArn {
    type Err = SettingsError;

    fn from_str(arn: &str) -> Result<Self, SettingsError> {
        let malformed = || {
            SettingsError::new(format!(
                "{arn:?} is not an MSK cluster ARN (arn:aws:kafka:REGION:ACCOUNT:cluster/NAME/ID)"
            ))
        };
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let [prefix, partition, service, region, account, resource] = parts[..] else { return Err(malformed()) };
        let resource: Vec<&str> = resource.split('/').collect();
        let well_formed = prefix == "arn"
            && partition.starts_with("aws")
            && service == "kafka"
            && !region.is_empty()
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && resource.len() == 3
            && resource[0] == "cluster"
            && resource[1..].iter().all(|p| !p.is_empty());
        if !well_formed {
            return Err(malformed());
        }
        Ok(Self { arn: arn.to_owned(), region: region.to_owned() })
    }
}

/// The bootstrap brokers of `arn` for `auth`'s listener, looked up with the AWS credentials of
/// the environment.
pub async fn bootstrap_brokers(arn: &ClusterArn, auth: &KafkaAuth) -> PortResult<String> {
    let config =
        aws_config::defaults(BehaviorVersion::latest()).region(Region::new(arn.region().to_owned())).load().await;
    bootstrap_brokers_with(&aws_sdk_kafka::Client::new(&config), arn, auth).await
}

/// The AWS region of the environment (`AWS_REGION`, `AWS_DEFAULT_REGION`, the profile), if any.
pub async fn default_region() -> Option<String> {
    aws_config::default_provider::region::DefaultRegionChain::builder().build().region().await.map(|r| r.to_string())
}

/// [`bootstrap_brokers`] through a given client (tests hand it one that replays recorded
/// responses).
pub(crate) async fn bootstrap_brokers_with(
    client: &aws_sdk_kafka::Client,
    arn: &ClusterArn,
    auth: &KafkaAuth,
) -> PortResult<String> {
    if let KafkaAuth::Scram { mechanism: ScramMechanism::Sha256, .. } = auth {
        return Err(PortError::Settings(
            "MSK's SASL/SCRAM listener takes SCRAM-SHA-512 only; choose scram-sha-512".into(),
        ));
    }
    let out =
        client.get_bootstrap_brokers().cluster_arn(arn.as_str()).send().await.map_err(|e| lookup_error(arn, e))?;
    pick(&out, arn, auth)
}

/// The listeners MSK reports, each with the auth that uses it.
fn listeners(out: &GetBootstrapBrokersOutput) -> [(&'static str, &'static str, Option<&str>); 4] {
    [
        ("plaintext", "plaintext", out.bootstrap_broker_string()),
        ("TLS", "tls", out.bootstrap_broker_string_tls()),
        ("SASL/SCRAM", "scram-sha-512", out.bootstrap_broker_string_sasl_scram()),
        ("IAM", "msk-iam", out.bootstrap_broker_string_sasl_iam()),
    ]
}

/// A broker string MSK returned, unless it is missing or empty (no such listener).
fn present(brokers: Option<&str>) -> Option<&str> {
    brokers.map(str::trim).filter(|b| !b.is_empty())
}

fn pick(out: &GetBootstrapBrokersOutput, arn: &ClusterArn, auth: &KafkaAuth) -> PortResult<String> {
    let index = match auth {
        KafkaAuth::Plaintext => 0,
        KafkaAuth::Tls => 1,
        KafkaAuth::Scram { .. } => 2,
        KafkaAuth::MskIam { .. } => 3,
    };
    let all = listeners(out);
    if let Some(brokers) = present(all[index].2) {
        return Ok(brokers.to_owned());
    }
    let open: Vec<String> = all
        .iter()
        .filter(|l| present(l.2).is_some())
        .map(|(listener, auth, _)| format!("{listener} ({auth})"))
        .collect();
    let open = if open.is_empty() { "none".to_owned() } else { open.join(", ") };
    Err(PortError::Settings(
        format!(
            "the MSK cluster {arn} has no {} listener, which {} auth needs; its listeners: {open}. Choose the auth of one of them, or turn that listener on for the cluster",
            all[index].0,
            auth.name()
        )
        .into(),
    ))
}

/// A missing cluster, a malformed request or refused credentials are permanent; throttling,
/// a server error or no answer are worth retrying. The SDK's whole error chain is kept.
fn lookup_error<E, R>(arn: &ClusterArn, e: SdkError<E, R>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: fmt::Debug + Send + Sync + 'static,
{
    let detail = super::error_chain(&e);
    let message = format!("looking up the bootstrap brokers of the MSK cluster {arn} failed: {detail}");
    // Whether it is worth retrying; `None` for a lookup that cannot succeed as asked.
    let retriable = match &e {
        SdkError::ServiceError(service) => match service.err().code() {
            Some("NotFoundException") => {
                return PortError::Settings(Failure::new(
                    format!(
                        "there is no MSK cluster {arn} in {} (or it is not visible to these AWS credentials): {detail}",
                        arn.region()
                    ),
                    e,
                ))
            }
            Some("TooManyRequestsException" | "ThrottlingException") => {
                return PortError::Throttled { retry_after: None }
            }
            Some("InternalServerErrorException" | "ServiceUnavailableException") => Some(true),
            _ => Some(false),
        },
        SdkError::ConstructionFailure(_) => None,
        // Timeouts, connection failures, unreadable responses.
        _ => Some(true),
    };
    match retriable {
        Some(true) => PortError::unavailable(message, e),
        Some(false) => PortError::backend(message, false, e),
        None => PortError::Settings(Failure::new(message, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::security::Secret;
    use aws_sdk_kafka::config::{Credentials, SharedCredentialsProvider};
    use aws_smithy_http_client::test_util::{ReplayEvent, StaticReplayClient};
    use aws_smithy_types::body::SdkBody;

    // No local AWS stand-in implements GetBootstrapBrokers (moto answers 500 to it), so these
    // tests run the real SDK client against the SDK's own recorded-response test client: the
    // request it sends is checked against the recorded one, and the recorded answer is what
    // MSK returns.

    const ARN: &str = "arn:aws:kafka:eu-west-1:123456789012:cluster/openqq/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-2";
    /// `ARN` as a path segment: `:` and `/` percent-encoded.
    const ENCODED_ARN: &str =
        "arn%3Aaws%3Akafka%3Aeu-west-1%3A123456789012%3Acluster%2Fopenqq%2F0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-2";

    fn every_listener() -> &'static str {
        r#"{
            "bootstrapBrokerString": "b-1.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9092,b-2.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9092",
            "bootstrapBrokerStringTls": "b-1.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9094,b-2.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9094",
            "bootstrapBrokerStringSaslScram": "b-1.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9096,b-2.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9096",
            "bootstrapBrokerStringSaslIam": "b-1.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9098,b-2.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9098"
        }"#
    }

    /// A recorded exchange: the request the SDK must send, and MSK's answer.
    fn recorded(status: u16, body: &'static str, extra_headers: &[(&str, &str)]) -> StaticReplayClient {
        let request = http::Request::builder()
            .method("GET")
            .uri(format!("https://kafka.eu-west-1.amazonaws.com/v1/clusters/{ENCODED_ARN}/bootstrap-brokers"))
            .body(SdkBody::empty())
            .unwrap();
        let mut response = http::Response::builder().status(status).header("content-type", "application/json");
        for (k, v) in extra_headers {
            response = response.header(*k, *v);
        }
        StaticReplayClient::new(vec![ReplayEvent::new(request, response.body(SdkBody::from(body)).unwrap())])
    }

    fn client(replay: &StaticReplayClient) -> aws_sdk_kafka::Client {
        let config = aws_sdk_kafka::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("eu-west-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "AKIDEXAMPLE",
                "secret",
                None,
                None,
                "test",
            )))
            .http_client(replay.clone())
            .build();
        aws_sdk_kafka::Client::from_conf(config)
    }

    fn scram() -> KafkaAuth {
        KafkaAuth::Scram { mechanism: ScramMechanism::Sha512, username: "u".into(), password: Secret::new("p") }
    }

    #[tokio::test]
    async fn each_auth_gets_the_brokers_of_its_own_listener() {
        let arn: ClusterArn = ARN.parse().unwrap();
        for (auth, port) in [
            (KafkaAuth::Plaintext, 9092),
            (KafkaAuth::Tls, 9094),
            (scram(), 9096),
            (KafkaAuth::MskIam { region: "eu-west-1".into() }, 9098),
        ] {
            let replay = recorded(200, every_listener(), &[]);
            let brokers = bootstrap_brokers_with(&client(&replay), &arn, &auth).await.unwrap();
            let ports: Vec<&str> = brokers.split(',').map(|b| b.rsplit(':').next().unwrap()).collect();
            assert_eq!(ports, [port.to_string(), port.to_string()], "{}: {brokers}", auth.name());
            // The request went to the cluster's region, to GetBootstrapBrokers' path with the
            // ARN percent-encoded in it, and was signed for the Kafka API.
            replay.assert_requests_match(&[]);
            let sent = replay.actual_requests().next().unwrap();
            assert_eq!(sent.method(), "GET");
            let authorization = sent.headers().get("authorization").unwrap();
            assert!(authorization.contains("/eu-west-1/kafka/aws4_request"), "{authorization}");
        }
    }

    #[tokio::test]
    async fn a_cluster_without_the_listener_for_the_auth_is_a_clear_error_naming_the_listeners_it_has() {
        let arn: ClusterArn = ARN.parse().unwrap();
        let tls_only = r#"{"bootstrapBrokerStringTls": "b-1.openqq.abc.c2.kafka.eu-west-1.amazonaws.com:9094"}"#;
        let replay = recorded(200, tls_only, &[]);
        let err = bootstrap_brokers_with(&client(&replay), &arn, &KafkaAuth::MskIam { region: "eu-west-1".into() })
            .await
            .unwrap_err();
        assert!(matches!(err, PortError::Settings(_)), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("has no IAM listener, which msk-iam auth needs"), "{message}");
        assert!(message.contains("its listeners: TLS (tls)"), "{message}");
    }

    #[tokio::test]
    async fn an_unknown_cluster_is_permanent_and_a_server_error_retriable() {
        let arn: ClusterArn = ARN.parse().unwrap();
        let not_found = r#"{"message": "The requested resource doesn't exist."}"#;
        let replay = recorded(404, not_found, &[("x-amzn-errortype", "NotFoundException")]);
        let err = bootstrap_brokers_with(&client(&replay), &arn, &KafkaAuth::Tls).await.unwrap_err();
        assert!(
            matches!(err, PortError::Settings(_)) && err.to_string().contains("there is no MSK cluster"),
            "{err:?}"
        );

        let replay = recorded(500, r#"{"message": "boom"}"#, &[("x-amzn-errortype", "InternalServerErrorException")]);
        let err = bootstrap_brokers_with(&client(&replay), &arn, &KafkaAuth::Tls).await.unwrap_err();
        assert!(err.is_retriable(), "{err:?}");
    }

    #[tokio::test]
    async fn scram_sha_256_is_refused_before_asking_msk_which_takes_sha_512_only() {
        let replay = StaticReplayClient::new(vec![]);
        let sha256 =
            KafkaAuth::Scram { mechanism: ScramMechanism::Sha256, username: "u".into(), password: Secret::new("p") };
        let err = bootstrap_brokers_with(&client(&replay), &ARN.parse().unwrap(), &sha256).await.unwrap_err();
        assert!(err.to_string().contains("SCRAM-SHA-512 only"), "{err}");
        assert_eq!(replay.actual_requests().count(), 0);
    }

    #[test]
    fn cluster_arns_are_checked_and_give_their_region() {
        let arn: ClusterArn = ARN.parse().unwrap();
        assert_eq!(arn.region(), "eu-west-1");
        assert!("arn:aws-us-gov:kafka:us-gov-west-1:123456789012:cluster/c/1".parse::<ClusterArn>().is_ok());
        for bad in [
            "",
            "openqq",
            "arn:aws:kafka:eu-west-1:123456789012:topic/openqq/x/t",
            "arn:aws:sqs:eu-west-1:123456789012:cluster/openqq/x",
            "arn:aws:kafka::123456789012:cluster/openqq/x",
            "arn:aws:kafka:eu-west-1:1234:cluster/openqq/x",
            "arn:aws:kafka:eu-west-1:123456789012:cluster/openqq",
        ] {
            let err = bad.parse::<ClusterArn>().unwrap_err().to_string();
            assert!(err.contains("is not an MSK cluster ARN"), "{bad:?}: {err}");
        }
    }
}
