//! The design store on DynamoDB (cargo feature `dynamodb`): one table holding designs, their
//! timelines, reports, accepted-revision markers, idempotency keys, feeds, webhooks and batches
//! (docs/DYNAMODB.md).
//!
//! - [`table`]: keys, item types, attribute names, and the table definition that
//!   [`DynamoDesignStore::create_table_if_missing`] creates against a local endpoint.
//! - `apply`: the revision rules ([`openqq_core::revision::plan`]) executed as one
//!   `TransactWriteItems` per state change, conditional on the design's write counter and
//!   revision; a lost race reads and plans again.
//! - `batch`: `apply_and_append` and `apply_batch`: the writes of one or several events and
//!   their feed entries (with deliveries) from one read, in as few transactions as DynamoDB
//!   allows (one per event or per group of events).
//! - `reads`: strongly consistent reads, listing per tenant with a cursor, usage, accepted
//!   markers.
//! - `idempotency`: claims, completions and releases of idempotency keys.
//! - `feed`: the tenant's event feed, numbered per tenant without gaps, and the deliveries an
//!   append queues in the same transaction.
//! - `webhooks`: webhooks, and their deliveries' claims, attempts and listing.
//! - `batches`: batches of design jobs (`openqq_core::batch`): a row per batch with its counts,
//!   a row per item, each item's move in one transaction with the counts it changes.
//! - `schedules`: tenants' schedules (`openqq_core::schedule`), their fire ledger (a conditional
//!   put per schedule and nominal time) and the runner's due read through the due index.
//! - `error`: every SDK error classified (throttled, unavailable, invalid, permanent), never
//!   flattened into one kind of failure.

mod apply;
mod batch;
mod batches;
mod budgets;
mod deletes;
mod error;
mod feed;
mod idempotency;
mod reads;
mod requests;
mod schedules;
mod specs;
pub mod table;
mod transact;
mod webhooks;

pub use apply::MAX_REPORT_ITEM_BYTES;
pub use reads::MAX_PAGE;
pub use webhooks::MAX_CLAIM_QUERIES;

use crate::aws_common::{credentials_in_environment, LOCAL_REGION};
use crate::SettingsError;
use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::config::Credentials;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use openqq_core::ports::{ApplyOp, BatchApplied, Failure, PortResult, Usage};
use openqq_core::schedule::{
    DueSchedule, FireOutcome, FireRecord, Recorded, RunnerState, ScheduleId, Schedules, Settle, StoredSchedule,
};
use openqq_core::webhook::{AttemptOutcome, Delivery};
use openqq_core::{
    AcceptedRevision, AcceptedRevisions, Applied, Change, DesignId, DesignReads, DesignView, DesignWrites,
    IdempotencyClaim, IdempotencyKey, IdempotencyKeys, KeptResponse, KeyClaim, Page, StoredReport, TenantId,
    TimelineEntry,
};
use openqq_core::{
    DeliveryQueue, FeedEntry, FeedReader, NewFeedEntry, Webhook, WebhookId, WebhookRegistry, WebhookSecret,
};
use openqq_core::{PortError, StoreRetention};
use std::sync::Mutex;
use std::time::Duration;

/// Where the store is: the table and, for a local stand-in, an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamoSettings {
    /// The table (`--dynamodb-table`).
    pub table: String,
    /// An endpoint other than AWS's (`--dynamodb-endpoint`, a local server). `AWS_ENDPOINT_URL`
    /// and `AWS_ENDPOINT_URL_DYNAMODB` are honoured too, as by every AWS SDK.
    pub endpoint: Option<String>,
}

pub struct DynamoDesignStore {
    client: Client,
    table: String,
    /// Where the last claim of due deliveries stopped at its query budget, for the next.
    claim_cursor: Mutex<Option<String>>,
    /// Each tenant's feed head and webhooks as last read or written here, from which a
    /// submission is written without a read (a hint: every write planned from it is conditional
    /// on it).
    memory: batch::Memory,
    /// How long what goes by age is kept (through the TTL attribute of its rows).
    retention: StoreRetention,
}

impl DynamoDesignStore {
    /// A store on `table` through `client` (tests hand in one configured for a local server or
    /// one that replays recorded responses). Every request it sends is counted in
    /// [`STORE_REQUESTS_METRIC`](crate::STORE_REQUESTS_METRIC).
    pub fn new(client: Client, table: impl Into<String>) -> Result<Self, SettingsError> {
        let table = table.into();
        if !table::valid_table_name(&table) {
            return Err(SettingsError::new(format!(
                "the DynamoDB table name {table:?} is not valid: 3 to 255 letters, digits, '_', '-' or '.'"
            )));
        }
        let client = Client::from_conf(client.config().to_builder().interceptor(requests::CountRequests).build());
        Ok(Self {
            client,
            table,
            claim_cursor: Mutex::new(None),
            memory: batch::Memory::default(),
            retention: StoreRetention::default(),
        })
    }

    /// Keeps what goes by age as `retention` says instead of the defaults: each row that goes
    /// by age carries its TTL attribute (DynamoDB deletes it some time after that passes), and
    /// reads pass over an accepted marker or a batch from then on.
    pub fn with_retention(mut self, retention: StoreRetention) -> Self {
        self.retention = retention;
        self
    }

    /// A store with the AWS settings and credentials of the environment. With an endpoint
    /// (given, or in `AWS_ENDPOINT_URL`) the table is created when missing and, when the
    /// environment names no region or credentials, a local server's stand-ins are used; against
    /// AWS nothing is ever created (the deployment template owns the table) and a missing table
    /// is an error.
    pub async fn connect(settings: &DynamoSettings) -> PortResult<Self> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(endpoint) = &settings.endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let sdk = loader.load().await;
        let local = sdk.endpoint_url().is_some();
        let mut config = aws_sdk_dynamodb::config::Builder::from(&sdk);
        if local && sdk.region().is_none() {
            config = config.region(Region::new(LOCAL_REGION));
        }
        if local && !credentials_in_environment() {
            // A local server accepts any key; without one the SDK would search instance metadata.
            config = config.credentials_provider(Credentials::new("local", "local", None, None, "local-endpoint"));
        }
        let config = config.build();
        if config.region().is_none() {
            return Err(SettingsError::new(
                "the DynamoDB store needs an AWS region: set AWS_REGION (or give --dynamodb-endpoint)",
            )
            .into());
        }
        let store = Self::new(Client::from_conf(config), settings.table.clone())?;
        if local {
            store.create_table_if_missing().await?;
        } else {
            table::require_table(&store.client, &store.table).await?;
        }
        Ok(store)
    }

    /// Creates the table from [`table`]'s definition unless it exists; returns whether it did.
    pub async fn create_table_if_missing(&self) -> PortResult<bool> {
        table::create_table_if_missing(&self.client, &self.table).await
    }

    pub fn table(&self) -> &str {
        &self.table
    }
}

#[async_trait]
impl AcceptedRevisions for DynamoDesignStore {
    async fn record_accepted(&self, tenant: &TenantId, accepted: &AcceptedRevision) -> PortResult<()> {
        reads::record_accepted(&self.client, &self.table, tenant, accepted, self.retention.accepted).await
    }

    /// One conditional update per marker, the designs' in flight at once and each design's in
    /// order: each update keeps the higher revision on its own, which one transaction would not
    /// allow (a single lower revision would cancel them all). Each marker is answered on its own:
    /// a design whose update failed (its tenant's partition throttled, say) fails its later
    /// markers with the same error, untried, and no other design's.
    async fn record_accepted_many(&self, accepted: &[(TenantId, AcceptedRevision)]) -> Vec<PortResult<()>> {
        let mut per_design: Vec<Vec<usize>> = Vec::new();
        let mut index: std::collections::HashMap<(&TenantId, &DesignId), usize> = std::collections::HashMap::new();
        for (at, (tenant, marker)) in accepted.iter().enumerate() {
            let design = *index.entry((tenant, &marker.design_id)).or_insert_with(|| {
                per_design.push(Vec::new());
                per_design.len() - 1
            });
            per_design[design].push(at);
        }
        let calls: Vec<_> = per_design
            .into_iter()
            .map(|at| {
                let (client, table, keep) = (self.client.clone(), self.table.clone(), self.retention.accepted);
                let markers: Vec<(TenantId, AcceptedRevision)> = at.iter().map(|&i| accepted[i].clone()).collect();
                let call = tokio::spawn(async move {
                    for (written, (tenant, marker)) in markers.iter().enumerate() {
                        if let Err(e) = reads::record_accepted(&client, &table, tenant, marker, keep).await {
                            return (written, Some(e));
                        }
                    }
                    (markers.len(), None)
                });
                (at, call)
            })
            .collect();
        let mut answers: Vec<Option<PortResult<()>>> = accepted.iter().map(|_| None).collect();
        for (at, call) in calls {
            let (written, error) = call.await.unwrap_or_else(|e| {
                (0, Some(PortError::Unavailable(Failure::from(format!("record accepted revision: {e}")))))
            });
            for &i in &at[..written] {
                answers[i] = Some(Ok(()));
            }
            if let Some(e) = error {
                for (&i, e) in at[written..].iter().zip(e.copies(at.len() - written)) {
                    answers[i] = Some(Err(e));
                }
            }
        }
        answers.into_iter().map(|a| a.expect("every marker belongs to one design's call")).collect()
    }
}

#[async_trait]
impl DesignWrites for DynamoDesignStore {
    async fn apply(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied> {
        apply::apply(&self.client, &self.table, tenant, design, entry, change, false).await
    }

    async fn apply_replay(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied> {
        apply::apply(&self.client, &self.table, tenant, design, entry, change, true).await
    }

    /// The write and its feed entry (with its deliveries) planned from one read and written in
    /// one transaction.
    async fn apply_and_append(
        &self,
        replayed: bool,
        tenant: &TenantId,
        design: &DesignId,
        entry: &TimelineEntry,
        change: &Change,
    ) -> PortResult<Applied> {
        let op = ApplyOp { replayed, tenant, design, entry, change };
        let mut done =
            batch::apply(&self.client, &self.table, &self.memory, std::slice::from_ref(&op), self.retention.feed).await;
        match (done.error.take(), done.applied.first()) {
            (Some(e), _) => Err(e),
            (None, Some(applied)) => Ok(*applied),
            (None, None) => Err(PortError::backend_message("a write of one event returned no outcome", false)),
        }
    }

    /// The whole batch from one read (per 100 keys) and in as few transactions as DynamoDB's
    /// limits allow.
    async fn apply_batch(&self, ops: &[ApplyOp<'_>]) -> BatchApplied {
        batch::apply(&self.client, &self.table, &self.memory, ops, self.retention.feed).await
    }

    async fn append_feed(&self, tenant: &TenantId, new: &NewFeedEntry<'_>) -> PortResult<u64> {
        feed::append(&self.client, &self.table, tenant, new, self.retention.feed).await
    }
}

#[async_trait]
impl DesignReads for DynamoDesignStore {
    async fn get(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<DesignView>> {
        reads::get(&self.client, &self.table, tenant, design).await
    }

    async fn list(&self, tenant: &TenantId, cursor: Option<&str>, limit: usize) -> PortResult<Page<DesignView>> {
        reads::list(&self.client, &self.table, tenant, cursor, limit).await
    }

    async fn report(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        revision: Option<u64>,
    ) -> PortResult<Option<StoredReport>> {
        reads::report(&self.client, &self.table, tenant, design, revision).await
    }

    async fn timeline(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<Vec<TimelineEntry>>> {
        reads::timeline(&self.client, &self.table, tenant, design).await
    }

    async fn usage(&self, tenant: &TenantId) -> PortResult<Usage> {
        reads::usage(&self.client, &self.table, tenant).await
    }
}

#[async_trait]
impl IdempotencyKeys for DynamoDesignStore {
    async fn claim_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        claim: &KeyClaim<'_>,
    ) -> PortResult<IdempotencyClaim> {
        idempotency::claim(&self.client, &self.table, tenant, key, claim).await
    }

    async fn complete_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
        response: &KeptResponse,
        ttl: Duration,
    ) -> PortResult<()> {
        idempotency::complete(&self.client, &self.table, tenant, key, fingerprint, response, ttl).await
    }

    async fn release_idempotency_key(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &[u8; 32],
    ) -> PortResult<()> {
        idempotency::release(&self.client, &self.table, tenant, key, fingerprint).await
    }
}

#[async_trait]
impl openqq_core::DailyBudgets for DynamoDesignStore {
    async fn charge_budget(
        &self,
        tenant: &TenantId,
        budget: openqq_core::Budget,
        day: &str,
        amount: u64,
        limit: u64,
    ) -> PortResult<openqq_core::Charge> {
        budgets::charge(&self.client, &self.table, tenant, &budget.key(day), amount, limit).await
    }

    async fn refund_budget(
        &self,
        tenant: &TenantId,
        budget: openqq_core::Budget,
        day: &str,
        amount: u64,
    ) -> PortResult<()> {
        budgets::refund(&self.client, &self.table, tenant, &budget.key(day), amount).await
    }

    async fn budget_spent(&self, tenant: &TenantId, budget: openqq_core::Budget, day: &str) -> PortResult<u64> {
        budgets::spent(&self.client, &self.table, tenant, &budget.key(day)).await
    }
}

#[async_trait]
impl openqq_core::DesignDeletes for DynamoDesignStore {
    async fn delete_design(
        &self,
        tenant: &TenantId,
        design: &DesignId,
        deletion: &openqq_core::Deletion,
    ) -> PortResult<Option<openqq_core::Deleted>> {
        let keep = (self.retention.feed, self.retention.tombstones);
        deletes::delete(&self.client, &self.table, tenant, design, deletion, keep).await
    }
}

#[async_trait]
impl openqq_core::KeptSpecs for DynamoDesignStore {
    async fn keep_spec(&self, tenant: &TenantId, design: &DesignId, spec: &openqq_core::KeptSpec) -> PortResult<()> {
        openqq_core::ports::check_kept_spec(spec)?;
        specs::keep(&self.client, &self.table, tenant, design, spec).await
    }

    async fn kept_spec(&self, tenant: &TenantId, design: &DesignId) -> PortResult<Option<openqq_core::KeptSpec>> {
        specs::kept(&self.client, &self.table, tenant, design).await
    }
}

#[async_trait]
impl Schedules for DynamoDesignStore {
    async fn create_schedule(&self, tenant: &TenantId, schedule: &StoredSchedule) -> PortResult<bool> {
        schedules::create(&self.client, &self.table, tenant, schedule).await
    }

    async fn schedule(&self, tenant: &TenantId, id: &ScheduleId) -> PortResult<Option<StoredSchedule>> {
        schedules::get(&self.client, &self.table, tenant, id).await
    }

    async fn list_schedules(
        &self,
        tenant: &TenantId,
        cursor: Option<&str>,
        limit: usize,
    ) -> PortResult<Page<StoredSchedule>> {
        schedules::list(&self.client, &self.table, tenant, cursor, limit).await
    }

    async fn update_schedule(
        &self,
        tenant: &TenantId,
        schedule: &StoredSchedule,
    ) -> PortResult<Option<StoredSchedule>> {
        schedules::update(&self.client, &self.table, tenant, schedule).await
    }

    async fn delete_schedule(&self, tenant: &TenantId, id: &ScheduleId) -> PortResult<bool> {
        schedules::delete(&self.client, &self.table, tenant, id).await
    }

    async fn record_fire(&self, tenant: &TenantId, id: &ScheduleId, fire: &FireRecord) -> PortResult<Recorded> {
        schedules::record(&self.client, &self.table, tenant, id, fire).await
    }

    async fn settle_fire(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        nominal: DateTime<Utc>,
        from: FireOutcome,
        to: &Settle,
    ) -> PortResult<Option<(bool, FireRecord)>> {
        schedules::settle(&self.client, &self.table, tenant, id, nominal, from, to).await
    }

    async fn fires(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        before: Option<DateTime<Utc>>,
        limit: usize,
    ) -> PortResult<Option<Page<FireRecord>>> {
        schedules::fires(&self.client, &self.table, tenant, id, before, limit).await
    }

    async fn due_schedules(&self, now: DateTime<Utc>, limit: usize) -> PortResult<Vec<DueSchedule>> {
        schedules::due(&self.client, &self.table, now, limit).await
    }

    async fn save_runner_state(
        &self,
        tenant: &TenantId,
        id: &ScheduleId,
        version: u64,
        state: &RunnerState,
        next_due: Option<DateTime<Utc>>,
    ) -> PortResult<bool> {
        schedules::save_state(&self.client, &self.table, tenant, id, version, state, next_due).await
    }
}

#[async_trait]
impl FeedReader for DynamoDesignStore {
    async fn read_feed(&self, tenant: &TenantId, after: u64, limit: usize) -> PortResult<Vec<FeedEntry>> {
        feed::read(&self.client, &self.table, tenant, after, limit).await
    }

    async fn feed_head(&self, tenant: &TenantId) -> PortResult<u64> {
        feed::head(&self.client, &self.table, tenant).await
    }
}

#[async_trait]
impl WebhookRegistry for DynamoDesignStore {
    async fn create_webhook(&self, tenant: &TenantId, hook: &Webhook) -> PortResult<()> {
        webhooks::create(&self.client, &self.table, tenant, hook).await
    }

    async fn list_webhooks(&self, tenant: &TenantId) -> PortResult<Vec<Webhook>> {
        webhooks::list(&self.client, &self.table, tenant).await
    }

    async fn get_webhook(&self, tenant: &TenantId, id: &WebhookId) -> PortResult<Option<Webhook>> {
        webhooks::get(&self.client, &self.table, tenant, id).await
    }

    async fn delete_webhook(&self, tenant: &TenantId, id: &WebhookId) -> PortResult<bool> {
        webhooks::delete(&self.client, &self.table, tenant, id).await
    }

    async fn rotate_webhook_secret(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        secret: &WebhookSecret,
        previous_until: DateTime<Utc>,
    ) -> PortResult<Option<Webhook>> {
        webhooks::rotate(&self.client, &self.table, tenant, id, secret, previous_until).await
    }
}

#[async_trait]
impl DeliveryQueue for DynamoDesignStore {
    async fn queue_delivery(&self, tenant: &TenantId, id: &WebhookId, entry: &FeedEntry) -> PortResult<()> {
        webhooks::queue(&self.client, &self.table, tenant, id, entry).await
    }

    async fn claim_due_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: Duration,
        per_tenant: usize,
        limit: usize,
    ) -> PortResult<Vec<Delivery>> {
        webhooks::claim(&self.client, &self.table, &self.claim_cursor, now, lease, per_tenant, limit).await
    }

    async fn finish_attempt(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        seq: u64,
        outcome: &AttemptOutcome,
        now: DateTime<Utc>,
    ) -> PortResult<()> {
        webhooks::finish(&self.client, &self.table, tenant, id, seq, outcome, now).await
    }

    async fn list_deliveries(
        &self,
        tenant: &TenantId,
        id: &WebhookId,
        cursor: Option<&str>,
        limit: usize,
    ) -> PortResult<Page<Delivery>> {
        webhooks::list_deliveries(&self.client, &self.table, tenant, id, cursor, limit).await
    }
}

#[cfg(test)]
mod tests;
