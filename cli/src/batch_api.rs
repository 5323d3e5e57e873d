//! The batch routes of the API as `openqq batch` calls them, with one tenant's token: submit a
//! JSON-lines file inline (`application/x-ndjson`, the options in the query string) or, when it is
//! larger than the API takes inline, as an upload (`POST /v1/uploads`, the bytes sent where the
//! grant says, then `{"name", "items_ref"}`); read a batch and page through its items; cancel.
//!
//! An answer the API refuses comes back as [`Refused`] (status and problem document), so the
//! caller can tell a refused batch (422 `invalid-items`, listing each item) from the rest.
//! `openqq schedule` asks the schedule routes through the same client ([`BatchApi::call`]).

use anyhow::{bail, Context, Result};
use reqwest::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// The API's default request-body limit (`--max-body-bytes`); a larger file goes as an upload.
pub const DEFAULT_INLINE_LIMIT: u64 = 4_718_592;
/// The largest upload the API takes (64 MiB).
pub const MAX_UPLOAD_BYTES: u64 = 64 << 20;
/// Most items a page of `GET …/items` holds.
pub const ITEMS_PAGE: usize = 1000;

/// An answer outside 2xx: its status and problem document (`Value::Null` when it had none).
#[derive(Debug, thiserror::Error)]
#[error("{what} answered {status}{}{}", detail(problem), hint(*status))]
pub struct Refused {
    pub what: String,
    pub status: StatusCode,
    pub problem: Value,
}

fn detail(problem: &Value) -> String {
    problem["detail"].as_str().or(problem["title"].as_str()).map_or(String::new(), |d| format!(": {d}"))
}

fn hint(status: StatusCode) -> &'static str {
    if status == StatusCode::UNAUTHORIZED {
        " (--token, OPENQQ_TOKEN: is it this server's?)"
    } else {
        ""
    }
}

/// How a batch is submitted besides its items.
#[derive(Debug, Clone)]
pub struct Options {
    pub name: String,
    /// `reject` or `skip`; the API's default (`reject`) when absent.
    pub on_invalid: Option<String>,
    /// A count (`5`) or a percentage (`10%`).
    pub max_failed: Option<String>,
}

/// The API at one address, with one tenant's token.
pub struct BatchApi {
    http: reqwest::Client,
    base: reqwest::Url,
    token: String,
}

impl BatchApi {
    pub fn new(url: &str, token: &str) -> Result<Self> {
        let base = reqwest::Url::parse(url).with_context(|| format!("--url {url:?}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!("--url must be http:// or https://, not {url:?}");
        }
        // Long enough for a large batch to be checked item by item before its 202.
        let http = reqwest::Client::builder().timeout(Duration::from_secs(300)).build()?;
        Ok(Self { http, base, token: token.trim().to_owned() })
    }

    /// Sends `req` with the token; the JSON answer, or [`Refused`].
    async fn send(&self, what: &str, req: reqwest::RequestBuilder) -> Result<Value> {
        let resp = req.bearer_auth(&self.token).send().await;
        let resp = resp.with_context(|| format!("{what}: is the platform up there? (--url, OPENQQ_URL)"))?;
        let status = resp.status();
        let body = resp.bytes().await.with_context(|| format!("reading the answer to {what}"))?;
        let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        Err(Refused { what: what.to_owned(), status, problem: value }.into())
    }

    fn url(&self, path: &str) -> Result<reqwest::Url> {
        Ok(self.base.join(path)?)
    }

    pub async fn get(&self, path: &str) -> Result<Value> {
        self.send(&format!("GET {path}"), self.http.get(self.url(path)?)).await
    }

    /// `method path` with `body` as JSON when given; the JSON answer (`Value::Null` for an empty
    /// one, a 204), or [`Refused`]. `path` may carry a query string.
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let mut req = self.http.request(method.clone(), self.url(path)?);
        if let Some(b) = body {
            req = req.json(b);
        }
        let what = format!("{method} {}", path.split('?').next().unwrap_or(path));
        self.send(&what, req).await
    }

    /// The items as JSON lines in the body, the options in the query string.
    pub async fn submit_inline(&self, options: &Options, jsonl: Vec<u8>) -> Result<Value> {
        let mut url = self.url("/v1/batches")?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("name", &options.name);
            if let Some(o) = &options.on_invalid {
                q.append_pair("on_invalid", o);
            }
            if let Some(m) = &options.max_failed {
                q.append_pair("max_failed", m);
            }
        }
        let req = self.http.post(url).header("content-type", "application/x-ndjson").body(jsonl);
        self.send("POST /v1/batches", req).await
    }

    /// The items uploaded first, then named as `items_ref`.
    pub async fn submit_uploaded(&self, options: &Options, jsonl: Vec<u8>) -> Result<Value> {
        let object = self.upload(jsonl).await?;
        let mut body = json!({"name": options.name, "items_ref": object});
        if let Some(o) = &options.on_invalid {
            body["on_invalid"] = json!(o);
        }
        if let Some(m) = &options.max_failed {
            body["max_failed"] = m.parse::<u64>().map_or_else(|_| json!(m), |n| json!(n));
        }
        self.send("POST /v1/batches", self.http.post(self.url("/v1/batches")?).json(&body)).await
    }

    /// Uploads `bytes` as the API's grant says (skipped when the tenant has them already) and
    /// answers the reference to name them by, `{"digest", "bytes"}`.
    async fn upload(&self, bytes: Vec<u8>) -> Result<Value> {
        let sha256: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        let ask = self.http.post(self.url("/v1/uploads")?).json(&json!({"sha256": sha256, "bytes": bytes.len()}));
        let grant = self.send("POST /v1/uploads", ask).await?;
        if grant["present"] == true {
            return Ok(grant["object"].clone());
        }
        let target = &grant["upload"];
        let method = reqwest::Method::from_bytes(target["method"].as_str().unwrap_or("PUT").as_bytes())?;
        let url = self.url(target["url"].as_str().context("the upload grant names no URL")?)?;
        let mut put = self.http.request(method, url);
        for (name, value) in target["headers"].as_object().into_iter().flatten() {
            put = put.header(name, value.as_str().unwrap_or_default());
        }
        // The grant's URL is the only credential the upload needs: no bearer token goes with it
        // (a presigned URL on another host must not see it).
        let resp = put.body(bytes).send().await.context("uploading the items")?;
        let status = resp.status();
        if !status.is_success() {
            let problem = resp.json().await.unwrap_or(Value::Null);
            return Err(Refused { what: "the upload".to_owned(), status, problem }.into());
        }
        Ok(grant["object"].clone())
    }

    pub async fn cancel(&self, id: &str) -> Result<Value> {
        let path = format!("/v1/batches/{id}/cancel");
        self.send(&format!("POST {path}"), self.http.post(self.url(&path)?)).await
    }

    /// Items of the batch with `status` (every one when `None`) from the start, a page at a time,
    /// until `max` are read or none is left; `each` gets every page.
    pub async fn items(
        &self,
        id: &str,
        status: Option<&str>,
        max: Option<usize>,
        mut each: impl FnMut(Vec<Value>),
    ) -> Result<()> {
        let (mut after, mut read) = (None::<String>, 0usize);
        loop {
            let limit = max.map_or(ITEMS_PAGE, |m| (m - read).clamp(1, ITEMS_PAGE));
            let mut path = format!("/v1/batches/{id}/items?limit={limit}");
            if let Some(s) = status {
                path.push_str(&format!("&status={s}"));
            }
            if let Some(a) = &after {
                path.push_str(&format!("&after={a}"));
            }
            let page = self.get(&path).await?;
            let items = page["items"].as_array().cloned().unwrap_or_default();
            read += items.len();
            each(items);
            match page["next"].as_str() {
                Some(next) if max.is_none_or(|m| read < m) => after = Some(next.to_owned()),
                _ => return Ok(()),
            }
        }
    }
}
