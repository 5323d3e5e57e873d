//! The API function on AWS Lambda: API Gateway HTTP API requests through the API router. Its
//! settings are the environment (`OPENQQ_*`, see `openqq_platform::Settings`) plus
//! `OPENQQ_JWT_SECRET`.

fn main() -> Result<(), openqq_platform::lambda::Error> {
    // Before the runtime's threads: a thread that has taken a malloc arena keeps it.
    openqq_platform::allocator::cap_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(openqq_platform::lambda::api())
}
