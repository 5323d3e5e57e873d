//! MSK IAM auth: SASL/OAUTHBEARER tokens signed with the process's AWS credentials
//! (`aws-msk-iam-sasl-signer`), and [`KafkaContext`], the rdkafka client context of every client
//! a [`KafkaEventLog`](super::KafkaEventLog) creates, which hands the tokens to librdkafka.
//!
//! librdkafka asks for a token through a callback that must answer at once, while signing is
//! async (credentials may come from an instance or task role over HTTP). So a background task
//! keeps one fresh token for the whole process (re-signed every 5 minutes; a token is valid for
//! 15), and the callback hands out the current one.
//!
//! rdkafka answers librdkafka's refresh request only while a client is polled. The producer
//! (its own polling thread) and the partition readers are polled anyway; the metadata and group
//! consumers are polled just before each use ([`KafkaContext::serve_refresh`]). rdkafka 0.39's
//! admin client never serves that request, so every client also gets the current token set
//! directly when it is created ([`KafkaContext::seed`]), which is all the short-lived admin
//! client needs, and spares the others a failed first connection.

use super::error_chain as chain;
use super::security::{KafkaAuth, KafkaSecurity};
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_msk_iam_sasl_signer::generate_auth_token_from_credentials_provider;
use openqq_core::ports::PortResult;
use openqq_core::{Failure, PortError};
use rdkafka::client::{Client, OAuthToken};
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientContext;
use std::error::Error;
use std::ffi::CString;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often the token is re-signed. A token is valid for 15 minutes and librdkafka asks for a
/// new one 80% through the life of the one it has, so the token it gets always has 10 or more.
const REFRESH_EVERY: Duration = Duration::from_secs(5 * 60);
/// How soon a failed re-signing is tried again (the current token stays in use meanwhile).
const RETRY_AFTER: Duration = Duration::from_secs(15);
/// How long signing may wait for the AWS credentials.
const SIGN_TIMEOUT: Duration = Duration::from_secs(10);

/// A signed token and when it expires, in milliseconds since the Unix epoch.
#[derive(Clone)]
struct Token {
    value: String,
    expires_ms: i64,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token").field("value", &"<redacted>").field("expires_ms", &self.expires_ms).finish()
    }
}

/// The process's current MSK IAM token, kept fresh by a background task.
pub(crate) struct IamTokens {
    region: Region,
    credentials: SharedCredentialsProvider,
    current: Mutex<Token>,
    /// How many times librdkafka was handed a token (tests check the callback is reached).
    handed_out: AtomicU64,
}

impl IamTokens {
    /// Signs a first token, so that missing or refused credentials fail at start-up, and keeps
    /// it fresh in the background until the last client is gone.
    pub(crate) async fn start(region: &str, credentials: SharedCredentialsProvider) -> PortResult<Arc<Self>> {
        let region = Region::new(region.to_owned());
        let first = sign(&region, &credentials).await?;
        let tokens = Arc::new(Self { region, credentials, current: Mutex::new(first), handed_out: AtomicU64::new(0) });
        tokio::spawn(keep_fresh(Arc::downgrade(&tokens)));
        Ok(tokens)
    }

    /// The current token, unless it has expired (re-signing kept failing).
    fn current(&self) -> Result<Token, String> {
        let token = self.current.lock().unwrap().clone();
        if token.expires_ms <= now_ms() {
            return Err(format!(
                "the MSK IAM token for {} expired and could not be renewed (see the earlier warnings)",
                self.region
            ));
        }
        Ok(token)
    }
}

async fn keep_fresh(tokens: Weak<IamTokens>) {
    let mut wait = REFRESH_EVERY;
    loop {
        tokio::time::sleep(wait).await;
        let Some(tokens) = tokens.upgrade() else { return };
        wait = match sign(&tokens.region, &tokens.credentials).await {
            Ok(token) => {
                *tokens.current.lock().unwrap() = token;
                REFRESH_EVERY
            }
            Err(e) => {
                tracing::warn!(error = %e, "Renewing the MSK IAM token failed; the current one stays in use until it expires.");
                RETRY_AFTER
            }
        };
    }
}

async fn sign(region: &Region, credentials: &SharedCredentialsProvider) -> PortResult<Token> {
    // Credentials are resolved here rather than by the signer, to tell missing ones
    // (permanent) from a provider that failed this time.
    let credentials = tokio::time::timeout(SIGN_TIMEOUT, credentials.provide_credentials())
        .await
        .map_err(|_| PortError::Unavailable(format!("signing an MSK IAM token: the AWS credentials did not arrive within {SIGN_TIMEOUT:?}").into()))?
        .map_err(|e| {
            let message = format!(
                "MSK IAM auth needs AWS credentials allowed kafka-cluster:Connect (environment, profile, or instance/task role), and none could be loaded: {}",
                chain(&e)
            );
            match e {
                CredentialsError::CredentialsNotLoaded(_) | CredentialsError::InvalidConfiguration(_) => {
                    PortError::Settings(Failure::new(message, e))
                }
                _ => PortError::unavailable(message, e),
            }
        })?;
    let (value, expires_ms) =
        generate_auth_token_from_credentials_provider(region.clone(), SharedCredentialsProvider::new(credentials))
            .await
            .map_err(|e| PortError::backend(format!("signing an MSK IAM token failed: {}", chain(&e)), false, e))?;
    Ok(Token { value, expires_ms })
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The rdkafka context of every client (producer, consumers, admin) of a
/// [`KafkaEventLog`](super::KafkaEventLog): with MSK IAM auth it answers librdkafka's
/// OAUTHBEARER token requests. It also keeps the last authentication failure a broker reported,
/// so a start-up that times out can say why.
#[derive(Clone, Default)]
pub struct KafkaContext {
    iam: Option<Arc<IamTokens>>,
    auth_failure: Arc<Mutex<Option<String>>>,
}

impl KafkaContext {
    /// The context `security` needs. For MSK IAM this loads the AWS configuration (credentials
    /// from the environment, a profile, or the instance/task role) and signs a first token.
    pub(super) async fn for_security(security: &KafkaSecurity) -> PortResult<Self> {
        let KafkaAuth::MskIam { region } = &security.auth else { return Ok(Self::default()) };
        let config = aws_config::defaults(BehaviorVersion::latest()).region(Region::new(region.clone())).load().await;
        let credentials = config.credentials_provider().ok_or_else(|| {
            PortError::Settings("MSK IAM auth needs AWS credentials and no credentials provider is configured".into())
        })?;
        Ok(Self { iam: Some(IamTokens::start(region, credentials).await?), ..Self::default() })
    }

    /// `e`, with the brokers' refusal of our credentials when there was one: librdkafka reports
    /// it as a global error and then only times the request out.
    pub(super) fn explain(&self, e: PortError) -> PortError {
        match self.auth_failure.lock().unwrap().clone() {
            Some(why) => PortError::Settings(Failure::new(
                format!("{e}; the brokers refused the client's credentials: {why}"),
                e,
            )),
            None => e,
        }
    }

    /// Sets the current token on `client` directly, for a client rdkafka never polls (the admin
    /// client) and so that a new client's first connection finds a token. A no-op without IAM.
    pub(super) fn seed<C: ClientContext>(&self, client: &Client<C>) -> PortResult<()> {
        let Some(iam) = &self.iam else { return Ok(()) };
        let token = iam.current().map_err(|e| PortError::Unavailable(e.into()))?;
        let value =
            CString::new(token.value).map_err(|e| PortError::backend("the MSK IAM token has a NUL byte", false, e))?;
        let principal = CString::default();
        let mut errstr = [0 as std::ffi::c_char; 512];
        // SAFETY: the client pointer is live for the borrow of `client`; the strings are
        // NUL-terminated and outlive the call, which copies them; no extensions are passed
        // (null, 0); `errstr` is writable for its whole length.
        let code = unsafe {
            rdkafka::bindings::rd_kafka_oauthbearer_set_token(
                client.native_ptr(),
                value.as_ptr(),
                token.expires_ms,
                principal.as_ptr(),
                std::ptr::null_mut(),
                0,
                errstr.as_mut_ptr(),
                errstr.len(),
            )
        };
        if code != rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            // SAFETY: librdkafka wrote a NUL-terminated message into `errstr`.
            let why = unsafe { std::ffi::CStr::from_ptr(errstr.as_ptr()) }.to_string_lossy().into_owned();
            return Err(PortError::backend_message(format!("librdkafka refused the MSK IAM token: {why}"), false));
        }
        Ok(())
    }

    /// Answers a pending token request of a consumer that is not otherwise polled (metadata and
    /// group consumers are never assigned partitions, so a poll returns no records).
    pub(super) fn serve_refresh<C: ConsumerContext>(&self, consumer: &BaseConsumer<C>) {
        if self.iam.is_none() {
            return;
        }
        for _ in 0..8 {
            match consumer.poll(Duration::ZERO) {
                None => return,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "A Kafka client reported an error while serving its token refresh.")
                }
                Some(Ok(_)) => {}
            }
        }
    }
}

impl ClientContext for KafkaContext {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Authentication) {
            *self.auth_failure.lock().unwrap() = Some(reason.to_owned());
        }
        tracing::error!("librdkafka: {error}: {reason}");
    }

    fn generate_oauth_token(&self, _config: Option<&str>) -> Result<OAuthToken, Box<dyn Error>> {
        let iam =
            self.iam.as_ref().ok_or("librdkafka asked for an OAUTHBEARER token, which only MSK IAM auth provides")?;
        let token = iam.current()?;
        iam.handed_out.fetch_add(1, Ordering::Relaxed);
        // `lifetime_ms` is when the token expires (ms since the epoch), which is what the
        // signer returns: librdkafka asks again 80% of the way there.
        Ok(OAuthToken { token: token.value, principal_name: String::new(), lifetime_ms: token.expires_ms })
    }
}

impl ConsumerContext for KafkaContext {}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_credential_types::provider::future;
    use aws_credential_types::Credentials;
    use base64::Engine;
    use rdkafka::config::ClientConfig;
    use rdkafka::producer::{BaseProducer, FutureProducer, Producer};
    use std::collections::HashMap;

    const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn static_credentials() -> SharedCredentialsProvider {
        SharedCredentialsProvider::new(Credentials::new("AKIDEXAMPLE", SECRET_KEY, None, None, "test"))
    }

    async fn iam_context(region: &str) -> KafkaContext {
        KafkaContext {
            iam: Some(IamTokens::start(region, static_credentials()).await.unwrap()),
            ..KafkaContext::default()
        }
    }

    fn oauthbearer_config() -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "127.0.0.1:1")
            .set("security.protocol", "sasl_ssl")
            .set("sasl.mechanism", "OAUTHBEARER");
        c
    }

    #[tokio::test]
    async fn an_iam_token_is_a_presigned_kafka_cluster_connect_url_whose_expiry_is_the_lifetime_given_to_librdkafka() {
        let before = now_ms();
        let context = iam_context("eu-central-1").await;
        let token = context.generate_oauth_token(None).unwrap();

        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token.token)
            .expect("the token is unpadded base64url");
        let url = url::Url::parse(std::str::from_utf8(&decoded).unwrap()).unwrap();
        assert_eq!(
            (url.scheme(), url.host_str(), url.path()),
            ("https", Some("kafka.eu-central-1.amazonaws.com"), "/")
        );
        let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
        assert_eq!(query["Action"], "kafka-cluster:Connect");
        assert_eq!(query["X-Amz-Algorithm"], "AWS4-HMAC-SHA256");
        let scope: Vec<&str> = query["X-Amz-Credential"].split('/').collect();
        assert_eq!(
            (scope[0], scope[2], scope[3], scope[4]),
            ("AKIDEXAMPLE", "eu-central-1", "kafka-cluster", "aws4_request"),
            "{scope:?}"
        );
        assert_eq!(query["X-Amz-SignedHeaders"], "host");
        assert_eq!(query["X-Amz-Signature"].len(), 64);
        assert!(
            !std::str::from_utf8(&decoded).unwrap().contains(SECRET_KEY),
            "the secret key signs the URL but is not in it"
        );

        // The lifetime handed to librdkafka is the signature's expiry, in ms since the epoch.
        let expires_s: i64 = query["X-Amz-Expires"].parse().unwrap();
        assert_eq!(expires_s, 900);
        let signed_at = chrono::NaiveDateTime::parse_from_str(&query["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
            .unwrap()
            .and_utc()
            .timestamp_millis();
        assert_eq!(token.lifetime_ms, signed_at + expires_s * 1000);
        assert!(signed_at >= before - 1000 && signed_at <= now_ms(), "signed now: {signed_at} vs {before}");
    }

    #[tokio::test]
    async fn a_token_past_its_expiry_is_not_handed_to_librdkafka() {
        let context = iam_context("eu-west-1").await;
        let iam = context.iam.as_ref().unwrap();
        iam.current.lock().unwrap().expires_ms = now_ms() - 1;
        let err = context.generate_oauth_token(None).err().expect("an expired token is refused").to_string();
        assert!(err.contains("expired"), "{err}");
        let producer: BaseProducer = oauthbearer_config().create().unwrap();
        assert!(context.seed(producer.client()).is_err());
    }

    #[derive(Debug)]
    struct NoCredentials;
    impl ProvideCredentials for NoCredentials {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            future::ProvideCredentials::ready(Err(CredentialsError::not_loaded("no credentials in this test")))
        }
    }

    #[tokio::test]
    async fn without_aws_credentials_msk_iam_fails_at_start_with_a_clear_message() {
        let err = IamTokens::start("eu-west-1", SharedCredentialsProvider::new(NoCredentials))
            .await
            .err()
            .expect("no token without credentials");
        assert!(matches!(err, PortError::Settings(_)), "{err:?}");
        let message = err.to_string();
        assert!(
            message.contains("needs AWS credentials") && message.contains("no credentials in this test"),
            "{message}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn producers_and_consumers_get_their_tokens_from_the_context() {
        let context = iam_context("eu-west-1").await;
        let iam = context.iam.clone().unwrap();

        // Seeding sets the token directly: librdkafka accepts it (it is unexpired and well-formed).
        let admin: rdkafka::admin::AdminClient<KafkaContext> =
            oauthbearer_config().create_with_context(context.clone()).unwrap();
        context.seed(admin.inner()).unwrap();

        // A consumer asks through the refresh event, which a poll serves.
        let mut consumer_config = oauthbearer_config();
        consumer_config.set("group.id", "g");
        let consumer: BaseConsumer<KafkaContext> = consumer_config.create_with_context(context.clone()).unwrap();
        context.serve_refresh(&consumer);
        assert!(iam.handed_out.load(Ordering::Relaxed) >= 1, "the consumer's token request reached the context");

        // The producer's polling thread serves it by itself.
        let before = iam.handed_out.load(Ordering::Relaxed);
        let _producer: FutureProducer<KafkaContext> =
            oauthbearer_config().create_with_context(context.clone()).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while iam.handed_out.load(Ordering::Relaxed) == before && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(iam.handed_out.load(Ordering::Relaxed) > before, "the producer's token request reached the context");
    }

    #[test]
    fn a_token_never_appears_in_debug_output() {
        let t = Token { value: "signed-url-token".into(), expires_ms: 1 };
        assert!(!format!("{t:?}").contains("signed-url"));
    }
}
