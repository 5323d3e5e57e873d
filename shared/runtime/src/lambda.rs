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
