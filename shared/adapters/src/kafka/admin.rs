//! Creating topics, for local clusters: the platform's at start, and any other the log is asked
//! about (as the embedded log takes any topic). A topic that already exists is left as it is
//! (its partition count wins); MSK deployments manage topics elsewhere and turn creation off.

use super::{KafkaContext, KafkaSettings};
use openqq_core::ports::PortResult;
use openqq_core::PortError;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

pub(super) async fn create_topics(
    settings: &KafkaSettings,
    context: &KafkaContext,
    topics: &[String],
) -> PortResult<()> {
    if topics.is_empty() {
        return Ok(()); // librdkafka refuses an empty CreateTopics
    }
    let admin: AdminClient<KafkaContext> =
        settings.client_config().create_with_context(context.clone()).map_err(|e| {
            PortError::from(crate::SettingsError::caused_by(format!("the Kafka admin settings are invalid: {e}"), e))
        })?;
    // rdkafka never polls an admin client for token refreshes: it gets its MSK IAM token here,
    // valid for longer than the admin client lives.
    context.seed(admin.inner())?;
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| NewTopic::new(t, settings.partitions as i32, TopicReplication::Fixed(settings.replication as i32)))
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(settings.timeout)).request_timeout(Some(settings.timeout));
    let results = admin.create_topics(&new, &opts).await.map_err(|e| {
        PortError::unavailable(
            format!(
                "creating the Kafka topics on {} failed: {e}; if topics are managed elsewhere (MSK), turn topic creation off",
                settings.brokers
            ),
            e,
        )
    })?;
    for result in results {
        match result {
            Ok(topic) => tracing::info!(
                topic,
                partitions = settings.partitions,
                replication = settings.replication,
                "Created a Kafka topic."
            ),
            Err((topic, RDKafkaErrorCode::TopicAlreadyExists)) => {
                tracing::debug!(topic, "The Kafka topic already exists.")
            }
            Err((topic, code)) => {
                return Err(PortError::Settings(
                    format!(
                        "creating the Kafka topic {topic:?} ({} partitions, replication {}) failed: {code}",
                        settings.partitions, settings.replication
                    )
                    .into(),
                ))
            }
        }
    }
    Ok(())
}
