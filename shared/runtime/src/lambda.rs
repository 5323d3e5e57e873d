//! Serving a consumer on AWS Lambda: the MSK trigger invokes the function with a `KafkaEvent`;
//! a batch error fails the invocation so the trigger retries the batch.

use crate::consumer::BatchHandler;
use crate::kafka::parse_event;
use lambda_runtime::{service_fn, LambdaEvent};
use std::sync::Arc;

/// Runs `handler` under the Lambda runtime until the sandbox is shut down.
pub async fn serve(handler: Arc<dyn BatchHandler>) -> Result<(), Error> {
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        let handler = handler.clone();
        async move {
            let kafka = parse_event(event.payload)?;
            handler.handle(kafka).await?;
            Ok::<(), Error>(())
        }
    }))
    .await
}

pub use lambda_runtime::Error;

/// What a function on Lambda reads from its environment: the Kafka settings of `openqq up`
/// (`OPENQQ_KAFKA_BROKERS` or `OPENQQ_MSK_CLUSTER_ARN`, `OPENQQ_KAFKA_AUTH`, …), its DynamoDB
/// settings (`OPENQQ_DYNAMODB_TABLE`, `OPENQQ_DYNAMODB_ENDPOINT`) and the embedded storage's place.
#[derive(clap::Parser)]
#[command(no_binary_name = true)]
struct FunctionEnv {
    #[command(flatten)]
    kafka: crate::kafka_flags::KafkaArgs,
    #[command(flatten)]
    dynamo: crate::dynamo_flags::DynamoArgs,
    /// The embedded store (without DynamoDB) and log (without Kafka).
    #[arg(long, env = "OPENQQ_DATA_DIR", default_value = "/tmp/openqq")]
    data_dir: std::path::PathBuf,
    #[arg(long, env = "OPENQQ_PARTITIONS", default_value_t = 12)]
    partitions: u32,
    #[arg(long, env = "OPENQQ_TOPIC_PREFIX", default_value = "")]
    topic_prefix: String,
}

/// Backends for a function on Lambda, from the environment: the event log on Kafka / MSK when
/// `OPENQQ_KAFKA_BROKERS` or `OPENQQ_MSK_CLUSTER_ARN` is set (the same settings, checks and
/// messages as `openqq up`'s flags), else embedded; the design store on DynamoDB when
/// `OPENQQ_DYNAMODB_TABLE` is set, so every function shares one store, else the embedded one in
/// `OPENQQ_DATA_DIR` (default `/tmp/openqq`): right for `cargo lambda watch` on one machine, not
/// for a fleet.
pub async fn backends_from_env() -> Result<(openqq_adapters::Backends, openqq_core::Topics), Error> {
    use clap::Parser;
    let env = FunctionEnv::try_parse_from(std::iter::empty::<String>())
        .map_err(|e| format!("the function's environment: {e}"))?;
    let topics = openqq_core::Topics::new(env.topic_prefix);
    // Bad Kafka settings stop the cold start before the data dir is touched.
    let kafka = crate::kafka_flags::settings(&env.kafka, env.partitions, topics.all()).await?;
    let dynamo = crate::dynamo_flags::settings(&env.dynamo)?;
    let backends =
        openqq_adapters::Backends::embedded(&env.data_dir, env.partitions, openqq_adapters::Durability::Process)?;
    let backends = crate::kafka_flags::apply(backends, kafka).await.map_err(|e| format!("{e:#}"))?;
    let backends = crate::dynamo_flags::apply(backends, dynamo).await.map_err(|e| format!("{e:#}"))?;
    Ok((backends, topics))
}

/// The whole `main` of a consumer function on Lambda: JSON logs, backends from the environment
/// (built once, at cold start), the handler `make` builds from them, wrapped in a [`Consumer`].
pub async fn run_consumer<H, F>(make: F) -> Result<(), Error>
where
    H: crate::RecordHandler + 'static,
    F: FnOnce(&openqq_adapters::Backends) -> H,
{
    openqq_telemetry::init_logs(openqq_telemetry::LogFormat::Json);
    let (backends, topics) = backends_from_env().await?;
    let handler = make(&backends);
    serve(Arc::new(crate::Consumer::new(handler, backends.log, backends.store, topics))).await
}
