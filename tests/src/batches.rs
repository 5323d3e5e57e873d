//! Driving batches: submitting one as an upload of JSON lines (`items_ref`, for batches larger
//! than a request body), and waiting for one to finish.

use crate::Client;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Uploads `bytes` through the API for `c`'s tenant, as the grant says (nothing to send when
/// the tenant has them already); the object to name (`{digest, bytes}`).
pub async fn upload(c: &Client, bytes: &[u8]) -> Result<Value> {
    let (status, grant) =
        c.post("/v1/uploads", &json!({"sha256": crate::sha256_hex(bytes), "bytes": bytes.len()})).await?;
    if status != 200 {
        bail!("the upload grant answered {status}: {grant}");
    }
    if grant["present"] != json!(true) {
        let upload = &grant["upload"];
        let mut req = c.http.put(upload["url"].as_str().context("a grant has a URL")?).body(bytes.to_vec());
        for (name, value) in upload["headers"].as_object().into_iter().flatten() {
            req = req.header(name.as_str(), value.as_str().unwrap_or_default());
        }
        let resp = req.send().await?;
        if !resp.status().is_success() {
            bail!("the upload answered {}: {}", resp.status(), resp.text().await.unwrap_or_default());
        }
    }
    Ok(json!({"digest": crate::sha256_hex(bytes), "bytes": bytes.len()}))
}

/// Uploads `items` as JSON lines and submits them as the batch `name`; its id.
pub async fn submit_by_upload(c: &Client, name: &str, items: &[Value]) -> Result<String> {
    let mut lines = Vec::new();
    for item in items {
        serde_json::to_writer(&mut lines, item)?;
        lines.push(b'\n');
    }
    let body = json!({"name": name, "items_ref": upload(c, &lines).await?});
    let (status, accepted) = c.post("/v1/batches", &body).await?;
    if status != 202 {
        bail!("the batch answered {status}: {accepted}");
    }
    Ok(accepted["batch_id"].as_str().context("a batch id")?.to_owned())
}

/// Waits until batch `id` is final (polling every `every`); the batch.
pub async fn finished(c: &Client, id: &str, within: Duration, every: Duration) -> Result<Value> {
    let deadline = Instant::now() + within;
    loop {
        let (status, batch) = c.get(&format!("/v1/batches/{id}")).await?;
        if status == 200 && batch["finished_at"].is_string() {
            return Ok(batch);
        }
        if Instant::now() > deadline {
            bail!("batch {id} did not finish within {within:?}: {batch}");
        }
        tokio::time::sleep(every).await;
    }
}
