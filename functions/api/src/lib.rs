//! The API function: HTTP API v1.
//!
//! [`router`] builds the whole API as an axum `Router`; the API function on Lambda
//! (`functions/lambda`, through `openqq_platform::lambda`) hands it to `lambda_http`, and
//! `openqq up` serves it on a TCP port ([`serve`]). Requests flow through these layers, outermost first:
//!
//! 1. [`correlation`]: accept a well-formed `x-correlation-id` or create one; echo it on every
//!    response; scope it for logs and problem documents.
//! 2. [`observe`]: request counts and latency histograms by route template and status.
//! 3. [`auth`]: the tenant (from the bearer JWT, or behind API Gateway from the claims its JWT
//!    authorizer verified: [`auth::Identity`]), then the tenant's request quota ([`limit`]).
//! 4. [`tenant_guard`]: the tenant's requests in progress (429 past the cap, at once), the body
//!    read outside the pool with its own deadline (408) and size limit (413), then the tenant's
//!    byte quota (429).
//! 5. [`pool`]: a fixed number of requests in progress, a bounded queue behind them, and an
//!    immediate 503 when the queue is full; handlers get the body already buffered.
//! 6. [`downstream`] (off by default): a simulated slow dependency for overload experiments.
//! 7. The handler in [`designs`], [`deletes`], [`batches`], [`schedules`], [`uploads`],
//!    [`webhooks`] or [`stream`]. `GET /v1/events/stream` ([`stream::live`]) skips steps 4 to 6: it has no body
//!    and does no work but wait, and caps its own streams per tenant.
//!
//! `PUT /v1/uploads/{digest}` ([`uploads::receive`]) passes through steps 1 and 2 only: its
//! signed token stands for the bearer token, and it applies the tenant's request quota, its
//! in-progress cap and its own body bounds itself (see [`uploads`]).
//!
//! `POST /v1/dev/tokens` ([`dev_tokens`], `openqq up --dev-tokens` only), `GET /v1/targets`
//! ([`targets`]), the web UI ([`ui`], at `/` and `/ui/{file}`) and `GET /healthz` pass through
//! steps 1 and 2 only: they need no token. Which operations need one is also what
//! docs/openapi.yaml says; the contract suite checks each route both ways. Metrics (which name
//! tenants) are not served here: `openqq up` serves them on a listener of their own
//! ([`observe::metrics_page`]).
//!
//! Every error is an RFC 9457 problem document ([`problem`]). [`serve`] serves the router on a
//! TCP listener with a header read timeout, a connection ceiling (overall and per client address)
//! and a connection lifetime.
//!
//! Submissions are published to the log and answered 202 once durable; submissions arriving
//! together share one append ([`grouped`]). Of the store, the API
//! writes only what it needs to answer: the accepted marker of each submission (so the design
//! reads at once) and idempotency keys; the designs, timelines and reports are materialised by
//! the consumer functions.

// `Problem` is every handler's error: built once per failed request, returned by value; boxing
// it would add an allocation to each error and buy nothing measurable.
#![allow(clippy::result_large_err)]

pub mod auth;
pub mod batches;
pub mod body;
pub mod correlation;
pub mod deletes;
pub mod designs;
pub mod dev_tokens;
pub mod downstream;
pub mod grouped;
pub mod limit;
pub mod log_bytes;
pub mod observe;
pub mod pool;
pub mod problem;
pub mod quota;
pub mod report_body;
pub mod report_full;
pub mod schedules;
pub mod serve;
pub mod stream;
pub mod targets;
pub mod tenant_guard;
pub mod ui;
pub mod uploads;
pub mod usage;
pub mod webhooks;

use axum::routing::{get, post, put};
use axum::Router;
use openqq_core::{
    DeliveryQueue, DesignReads, DesignStore, EventLog, FeedReader, ObjectStore, PresignedUploads, RateLimiter, Topics,
    WebhookRegistry,
};
use std::sync::Arc;

pub use auth::{Claims, JwtKeys};
pub use downstream::DownstreamConfig;
pub use limit::LimitPolicy;
pub use pool::PoolConfig;
pub use serve::ServeConfig;
pub use tenant_guard::{TenantGuard, TenantLimits};

/// Everything a request may need, built once at start-up (cold start on Lambda) with
/// [`AppState::builder`]. Each handler reaches the store through the role it uses.
#[derive(Clone)]
pub struct AppState {
    pub(crate) log: Arc<dyn EventLog>,
    /// Designs, reports, timelines and usage.
    pub(crate) reads: Arc<dyn DesignReads>,
    /// The store's accepted-revision markers, written together for concurrent submissions.
    pub(crate) accepted: Arc<grouped::Markers>,
    pub(crate) idempotency: designs::idempotency::Idempotency,
    pub(crate) feed: Arc<dyn FeedReader>,
    pub(crate) webhooks: Arc<dyn WebhookRegistry>,
    pub(crate) deliveries: Arc<dyn DeliveryQueue>,
    /// Large payloads: uploads and netlists put there before publishing ([`uploads`],
    /// [`designs`]), full validation reports read by `GET /v1/designs/{id}/report/full`.
    pub(crate) objects: Arc<dyn ObjectStore>,
    /// Where clients upload themselves, when the object store lets them (S3); otherwise uploads
    /// come through `PUT /v1/uploads/{digest}`.
    pub(crate) presigned: Option<Arc<dyn PresignedUploads>>,
    pub(crate) limiter: Arc<dyn RateLimiter>,
    pub(crate) limits: Arc<LimitPolicy>,
    pub(crate) keys: Arc<JwtKeys>,
    /// Who establishes the caller's tenant: the API's own token check, or a gateway in front.
    pub(crate) identity: auth::Identity,
    pub(crate) topics: Topics,
    /// Largest request body accepted, in bytes.
    pub(crate) max_body_bytes: usize,
    /// How often an open event stream reads the store while it has nothing to send.
    pub(crate) feed_poll: std::time::Duration,
    /// Whether webhooks may target private, loopback and link-local addresses (development only).
    pub(crate) webhooks_allow_private: bool,
    /// Per-tenant bounds: requests in progress, body deadline, bytes per window, open streams.
    pub(crate) tenants: Arc<TenantGuard>,
    /// The upload `PUT`'s memory, shared fairly between tenants, and its pace ([`uploads`]).
    pub(crate) uploads: Arc<uploads::memory::UploadMemory>,
    /// What each tenant may keep in the store; submissions over it are refused with 403.
    pub(crate) quota: Arc<quota::StorageQuota>,
    /// Whether `POST /v1/dev/tokens` mints tokens ([`dev_tokens`]): only `openqq up
    /// --dev-tokens`, never on Lambda.
    pub(crate) dev_tokens: bool,
    /// Whether jobs may carry `generate`, and the tenants' daily token budget.
    pub(crate) generation: GenerationPolicy,
    /// What each tenant spent per day: generation tokens (the generation function charges them)
    /// and event-log bytes (charged here as designs and batches are accepted, through
    /// `log_bytes`).
    pub(crate) budgets: Arc<dyn openqq_core::DailyBudgets>,
    /// This process's count of each tenant's event-log bytes, synced to `budgets`.
    pub(crate) log_bytes: Arc<log_bytes::LogBytes>,
    /// Batches: created for reads once accepted, read, cancelled.
    pub(crate) batches: Arc<dyn openqq_core::Batches>,
    /// Schedules and their fire ledger ([`schedules`]).
    pub(crate) schedules: Arc<dyn openqq_core::Schedules>,
    /// Each design's latest specification, which a revalidation submits again.
    pub(crate) specs: Arc<dyn openqq_core::KeptSpecs>,
    /// Deletes designs (`DELETE /v1/designs/{id}`, [`deletes`]).
    pub(crate) deletes: Arc<dyn openqq_core::DesignDeletes>,
    /// The time the schedule routes and the scheduler read, and the scheduler's wake-up.
    pub(crate) clock: schedules::ScheduleClock,
}

/// What the API knows of generation: whether a model is configured, and each tenant's daily
/// token budget.
#[derive(Debug, Clone, Copy)]
pub struct GenerationPolicy {
    pub configured: bool,
    pub daily_tokens: u64,
}

impl Default for GenerationPolicy {
    fn default() -> Self {
        GenerationPolicy { configured: false, daily_tokens: DEFAULT_DAILY_TOKENS }
    }
}

/// The generation token budget of a tenant per UTC day where none is configured.
pub const DEFAULT_DAILY_TOKENS: u64 = 1_000_000;

impl AppState {
    /// The state of an API that publishes to `log`, keeps designs in `store` (each handler gets
    /// the role it uses) and payloads in `objects`, limits tenants with `limiter` and verifies
    /// tokens with `keys`. Everything else starts at its default: change it with the builder.
    pub fn builder(
        log: Arc<dyn EventLog>,
        store: Arc<dyn DesignStore>,
        objects: Arc<dyn ObjectStore>,
        limiter: Arc<dyn RateLimiter>,
        keys: Arc<JwtKeys>,
    ) -> AppStateBuilder {
        AppStateBuilder(AppState {
            log,
            reads: store.clone(),
            accepted: grouped::markers(store.clone()),
            idempotency: designs::idempotency::Idempotency {
                keys: store.clone(),
                window: designs::idempotency::DEFAULT_WINDOW,
            },
            feed: store.clone(),
            webhooks: store.clone(),
            deliveries: store.clone(),
            objects,
            presigned: None,
            limiter,
            limits: Arc::new(LimitPolicy::new(DEFAULT_RATE_LIMIT)),
            keys,
            identity: auth::Identity::default(),
            topics: Topics::default(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            feed_poll: DEFAULT_FEED_POLL,
            webhooks_allow_private: false,
            tenants: TenantGuard::new(TenantLimits::default()),
            uploads: uploads::memory::UploadMemory::new(uploads::UploadLimits::default()),
            quota: Arc::new(quota::StorageQuota::new(quota::StorageLimits::default())),
            dev_tokens: false,
            generation: GenerationPolicy::default(),
            budgets: store.clone(),
            log_bytes: Arc::new(log_bytes::LogBytes::new(store.clone())),
            batches: store.clone(),
            schedules: store.clone(),
            specs: store.clone(),
            deletes: store,
            clock: schedules::ScheduleClock::default(),
        })
    }
}

/// Builds an [`AppState`]: [`AppState::builder`], then a method for each setting that differs
/// from its default, then [`build`](Self::build).
pub struct AppStateBuilder(AppState);

impl AppStateBuilder {
    /// Each tenant's request quota, with its overrides (default: [`DEFAULT_RATE_LIMIT`]).
    pub fn limits(mut self, limits: Arc<LimitPolicy>) -> Self {
        self.0.limits = limits;
        self
    }

    /// The object store's direct uploads, when it has them (default: none, so clients upload
    /// through the API).
    pub fn presigned_uploads(mut self, presigned: Option<Arc<dyn PresignedUploads>>) -> Self {
        self.0.presigned = presigned;
        self
    }

    /// Who establishes the caller's tenant (default: the API's own token check).
    pub fn identity(mut self, identity: auth::Identity) -> Self {
        self.0.identity = identity;
        self
    }

    /// The topics submissions are published to (default: without a prefix).
    pub fn topics(mut self, topics: Topics) -> Self {
        self.0.topics = topics;
        self
    }

    /// The largest request body accepted (default: [`DEFAULT_MAX_BODY_BYTES`]).
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.0.max_body_bytes = bytes;
        self
    }

    /// How often an idle event stream reads the feed (default: [`DEFAULT_FEED_POLL`]).
    pub fn feed_poll(mut self, every: std::time::Duration) -> Self {
        self.0.feed_poll = every;
        self
    }

    /// Let webhooks target private, loopback and link-local addresses (development only).
    pub fn webhooks_allow_private(mut self, allow: bool) -> Self {
        self.0.webhooks_allow_private = allow;
        self
    }

    /// Per-tenant bounds in front of the handlers (default: [`TenantLimits::default`]).
    pub fn tenant_limits(mut self, limits: TenantLimits) -> Self {
        self.0.tenants = TenantGuard::new(limits);
        self
    }

    /// The upload `PUT`'s memory and pace (default: [`uploads::UploadLimits::default`]).
    pub fn upload_limits(mut self, limits: uploads::UploadLimits) -> Self {
        self.0.uploads = uploads::memory::UploadMemory::new(limits);
        self
    }

    /// What each tenant may keep (default: [`quota::StorageLimits::default`]).
    pub fn storage_limits(mut self, limits: quota::StorageLimits) -> Self {
        self.0.quota = Arc::new(quota::StorageQuota::new(limits));
        self
    }

    /// How long an answer is replayed for its `Idempotency-Key` (default:
    /// [`designs::idempotency::DEFAULT_WINDOW`]).
    pub fn idempotency_window(mut self, window: std::time::Duration) -> Self {
        self.0.idempotency.window = window;
        self
    }

    /// Whether `POST /v1/dev/tokens` mints tokens for any tenant (development only; default off).
    pub fn dev_tokens(mut self, on: bool) -> Self {
        self.0.dev_tokens = on;
        self
    }

    /// Whether a generation model is configured, so jobs may carry `generate` (default: none;
    /// such jobs are refused with 422 and what to set), and the daily token budget.
    pub fn generation(mut self, policy: GenerationPolicy) -> Self {
        self.0.generation = policy;
        self
    }

    /// Where schedules read the time and how the scheduler is woken (default: the system's
    /// clock; tests hand in a `TestClock`).
    pub fn schedule_clock(mut self, clock: schedules::ScheduleClock) -> Self {
        self.0.clock = clock;
        self
    }

    pub fn build(self) -> AppState {
        self.0
    }
}

/// The request quota per tenant where none is configured: 100 requests a second.
pub const DEFAULT_RATE_LIMIT: openqq_core::Quota =
    openqq_core::Quota { limit: 100, window: std::time::Duration::from_secs(1) };

/// How often an idle event stream reads the feed where nothing else is set.
pub const DEFAULT_FEED_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Default request-body limit, 4.5 MiB: a netlist of 4 MiB inline fits with the rest of its
/// design. On AWS a body travels to the function inside the Lambda invocation payload (6 MB), as
/// a JSON string whose quotes are escaped (Yosys netlists are about a tenth quotes), so a larger
/// body could not reach the function at all. Larger netlists, up to 64 MiB, go through uploads
/// ([`uploads`]); records never carry more than a reference to either
/// ([`openqq_core::design::INLINE_PAYLOAD_MAX_BYTES`]).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4608 * 1024;

/// The API router with every layer.
pub fn router(state: AppState, pool: PoolConfig) -> Router {
    // Submissions arriving together share their log appends ([`grouped`]).
    let state = AppState { log: Arc::new(grouped::GroupedAppends::new(grouped::Appends(state.log))), ..state };
    let v1 = Router::new()
        .route("/v1/designs", post(designs::submit).get(designs::list))
        .route("/v1/designs/{id}", get(designs::get_one).delete(deletes::delete))
        .route("/v1/designs/{id}/revisions", post(designs::revise))
        .route("/v1/designs/{id}/report", get(designs::report))
        .route("/v1/designs/{id}/report/full", get(report_full::full_report))
        .route("/v1/designs/{id}/events", get(designs::events))
        .route("/v1/uploads", post(uploads::begin))
        .route("/v1/events", get(stream::page))
        .route("/v1/webhooks", post(webhooks::create).get(webhooks::list))
        .route("/v1/webhooks/{id}", get(webhooks::get_one).delete(webhooks::delete))
        .route("/v1/webhooks/{id}/rotate", post(webhooks::rotate))
        .route("/v1/webhooks/{id}/test", post(webhooks::test))
        .route("/v1/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route("/v1/batches", post(batches::submit).get(batches::list))
        .route("/v1/batches/{id}", get(batches::get_one))
        .route("/v1/batches/{id}/items", get(batches::items))
        .route("/v1/batches/{id}/cancel", post(batches::cancel))
        .route("/v1/batches/{id}/retry", post(batches::retry))
        .route("/v1/schedules", post(schedules::create).get(schedules::list))
        .route("/v1/schedules/{id}", get(schedules::get_one).patch(schedules::update).delete(schedules::delete))
        .route("/v1/schedules/{id}/fires", get(schedules::fires))
        .route("/v1/schedules/{id}/trigger", post(schedules::trigger))
        .route("/v1/schedules/{id}/backfill", post(schedules::backfill))
        .route("/v1/usage", get(usage::usage))
        .route("/v1/objects/{digest}", get(usage::object));
    let v1 = match pool.simulated_downstream {
        Some(d) => v1.layer(axum::middleware::from_fn_with_state(downstream::Downstream::new(d), downstream::layer)),
        None => v1,
    };
    // A layer wraps the routes added before it: the stream is added after the pool and the
    // tenant guard, so it passes through authentication and the request quota only.
    let v1 = v1
        .layer(axum::middleware::from_fn_with_state(pool::Pool::new(pool), pool::layer))
        .layer(axum::middleware::from_fn_with_state(state.clone(), tenant_guard::layer))
        .route("/v1/events/stream", get(stream::live))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::guard));
    Router::new()
        .merge(v1)
        .route("/v1/uploads/{digest}", put(uploads::receive))
        .route("/v1/dev/tokens", post(dev_tokens::mint).get(dev_tokens::offered))
        .route("/v1/targets", get(targets::list))
        .route("/", get(ui::index))
        .route("/ui/{file}", get(ui::asset))
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }))
        .fallback(problem::not_found)
        .method_not_allowed_fallback(problem::method_not_allowed)
        .layer(axum::middleware::from_fn(observe::record))
        .layer(axum::middleware::from_fn(correlation::layer))
        .with_state(state)
}
