//! The API function on AWS Lambda: API Gateway HTTP API requests through the API router. Its
//! settings are the environment (`OPENQQ_*`, see `openqq_platform::Settings`) plus
//! `OPENQQ_JWT_SECRET`.

fn main() -> Result<(), openqq_platform::lambda::Error> {
    openqq_platform::allocator::runtime()?.block_on(openqq_platform::lambda::api())
}
