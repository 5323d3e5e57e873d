//! TEMPORARY: the feed and webhook ports before their store implementations land. Every call but
//! `append_feed` fails; `append_feed` answers 0 so the pipeline keeps running meanwhile.

#[allow(unused_macros)] // used by the DynamoDB store only (feature `dynamodb`)
macro_rules! feed_and_webhooks_not_yet {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl openqq_core::EventFeed for $store {
            async fn append_feed(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::NewFeedEntry<'_>,
            ) -> openqq_core::ports::PortResult<u64> {
                Ok(0)
            }
            async fn read_feed(
                &self,
                _: &openqq_core::TenantId,
                _: u64,
                _: usize,
            ) -> openqq_core::ports::PortResult<Vec<openqq_core::FeedEntry>> {
                Err(openqq_core::PortError::backend_message("the feed is not implemented yet", false))
            }
        }

        #[async_trait::async_trait]
        impl openqq_core::WebhookStore for $store {
            async fn create_webhook(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::Webhook,
            ) -> openqq_core::ports::PortResult<()> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn list_webhooks(
                &self,
                _: &openqq_core::TenantId,
            ) -> openqq_core::ports::PortResult<Vec<openqq_core::Webhook>> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn get_webhook(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::WebhookId,
            ) -> openqq_core::ports::PortResult<Option<openqq_core::Webhook>> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn delete_webhook(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::WebhookId,
            ) -> openqq_core::ports::PortResult<bool> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn rotate_webhook_secret(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::WebhookId,
                _: &openqq_core::WebhookSecret,
                _: chrono::DateTime<chrono::Utc>,
            ) -> openqq_core::ports::PortResult<Option<openqq_core::Webhook>> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn queue_delivery(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::WebhookId,
                _: &openqq_core::FeedEntry,
            ) -> openqq_core::ports::PortResult<()> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn claim_due_deliveries(
                &self,
                _: chrono::DateTime<chrono::Utc>,
                _: std::time::Duration,
                _: usize,
                _: usize,
            ) -> openqq_core::ports::PortResult<Vec<openqq_core::webhook::Delivery>> {
                Ok(Vec::new())
            }
            async fn finish_attempt(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::WebhookId,
                _: u64,
                _: &openqq_core::webhook::AttemptOutcome,
                _: chrono::DateTime<chrono::Utc>,
            ) -> openqq_core::ports::PortResult<()> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
            async fn list_deliveries(
                &self,
                _: &openqq_core::TenantId,
                _: &openqq_core::WebhookId,
                _: Option<&str>,
                _: usize,
            ) -> openqq_core::ports::PortResult<openqq_core::Page<openqq_core::webhook::Delivery>> {
                Err(openqq_core::PortError::backend_message("webhooks are not implemented yet", false))
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use feed_and_webhooks_not_yet;
