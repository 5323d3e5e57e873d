//! `openqq design show ID`: one design as the API tells its tenant (the design, its report, and
//! with `--waveform` each failing testbench's dump), printed as tables: status and verdict, the
//! source files, each generation attempt, each check's verdict and duration, and for a failing
//! testbench when it first failed and where its waveform is. The formatting is pure
//! (`design_format.rs`, `design_wave.rs`); this module asks the API.
//!
//! `openqq design delete ID`: `DELETE /v1/designs/{id}` (docs/API.md, "Deleting a design").

use crate::design_format::{show, waveforms};
use crate::design_wave::draw;
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Args)]
pub struct DesignArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Print one design: its status and verdict, source files, generation attempts, and each
    /// check's verdict, with the first failure and waveform of a failing testbench.
    Show(ShowArgs),
    /// Delete one design: its reports, timeline and the objects only it names. Refused while a
    /// revision of it is in flight; with --wait, asks again until that revision has ended.
    Delete(DeleteArgs),
}

#[derive(Args)]
struct DeleteArgs {
    /// The design's id.
    id: String,
    /// The API's address.
    #[arg(long, env = "OPENQQ_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// A bearer token of the design's tenant.
    #[arg(long, env = "OPENQQ_TOKEN", hide_env_values = true)]
    token: String,
    /// While a revision is in flight (409), ask again for up to this many seconds.
    #[arg(long, default_value_t = 0)]
    wait: u64,
}

#[derive(Args)]
struct ShowArgs {
    /// The design's id, as POST /v1/designs answered it.
    id: String,
    /// The API's address.
    #[arg(long, env = "OPENQQ_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// A bearer token of the design's tenant (`openqq token --tenant T` makes one for `openqq up`).
    #[arg(long, env = "OPENQQ_TOKEN", hide_env_values = true)]
    token: String,
    /// Also draw each failing testbench's waveform around its first failure.
    #[arg(long)]
    waveform: bool,
    /// Columns of a drawn waveform.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(8..=400))]
    columns: u16,
    /// Print the design and its report as one JSON document instead.
    #[arg(long, conflicts_with = "waveform")]
    json: bool,
}

pub fn run(args: DesignArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match args.action {
        Action::Show(args) => runtime.block_on(show_design(args)),
        Action::Delete(args) => runtime.block_on(delete_design(args)),
    }
}

/// A design id as a path segment: letters, digits, `-` and `_` only.
fn path_id(raw: &str) -> Result<&str> {
    let id = raw.trim();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("{raw:?} is not a design id");
    }
    Ok(id)
}

async fn delete_design(args: DeleteArgs) -> Result<()> {
    let api = Api::new(&args.url, &args.token)?;
    let id = path_id(&args.id)?;
    let path = format!("/v1/designs/{id}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.wait);
    loop {
        let url = api.base.join(&path)?;
        let resp = api.http.delete(url.clone()).bearer_auth(&api.token).send().await;
        let resp = resp.with_context(|| format!("asking {url}: is the platform up there? (--url, OPENQQ_URL)"))?;
        let status = resp.status();
        match status {
            StatusCode::NO_CONTENT => {
                println!("Deleted design {id}.");
                return Ok(());
            }
            StatusCode::NOT_FOUND => bail!("design {id} was not found for this token's tenant"),
            StatusCode::CONFLICT if tokio::time::Instant::now() < deadline => {
                let after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(1);
                tokio::time::sleep(Duration::from_secs(after).min(deadline - tokio::time::Instant::now())).await;
            }
            s => return Err(refused("DELETE", s, &resp.text().await.unwrap_or_default(), &path)),
        }
    }
}

async fn show_design(args: ShowArgs) -> Result<()> {
    let api = Api::new(&args.url, &args.token)?;
    let id = path_id(&args.id)?;
    let design = match api.json(&format!("/v1/designs/{id}")).await? {
        Some(d) => d,
        None => bail!("design {id} was not found for this token's tenant"),
    };
    let report = api.json(&format!("/v1/designs/{id}/report")).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json!({"design": design, "report": report}))?);
        return Ok(());
    }
    print!("{}", show(&design, report.as_ref()));
    if args.waveform {
        for w in report.as_ref().map(waveforms).unwrap_or_default() {
            let Some(digest) = &w.digest else { continue };
            let bytes = api.object(digest).await.with_context(|| format!("reading the waveform {digest}"))?;
            let dump = openqq_hdl::vcd::parse(&String::from_utf8_lossy(&bytes));
            println!("\nTestbench {}:", w.testbench);
            print!("{}", draw(&dump, &w.timescale, w.first_failure_time, usize::from(args.columns)));
        }
    }
    Ok(())
}

/// The API at one address, with one tenant's token.
struct Api {
    http: reqwest::Client,
    base: reqwest::Url,
    token: String,
}

impl Api {
    fn new(url: &str, token: &str) -> Result<Self> {
        let base = reqwest::Url::parse(url).with_context(|| format!("--url {url:?}"))?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!("--url must be http:// or https://, not {url:?}");
        }
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        Ok(Self { http, base, token: token.trim().to_owned() })
    }

    async fn get(&self, path: &str) -> Result<reqwest::Response> {
        let url = self.base.join(path)?;
        let resp = self.http.get(url.clone()).bearer_auth(&self.token).send().await;
        resp.with_context(|| format!("asking {url}: is the platform up there? (--url, OPENQQ_URL)"))
    }

    /// The JSON of `path`, or `None` for 404; any other failure says what the API said.
    async fn json(&self, path: &str) -> Result<Option<Value>> {
        let resp = self.get(path).await?;
        match resp.status() {
            StatusCode::NOT_FOUND => Ok(None),
            s if s.is_success() => Ok(Some(resp.json().await.with_context(|| format!("reading {path}"))?)),
            s => Err(refused("GET", s, &resp.text().await.unwrap_or_default(), path)),
        }
    }

    /// One of the tenant's objects.
    async fn object(&self, digest: &str) -> Result<Vec<u8>> {
        let path = format!("/v1/objects/{digest}");
        let resp = self.get(&path).await?;
        match resp.status() {
            s if s.is_success() => Ok(resp.bytes().await?.to_vec()),
            s => Err(refused("GET", s, &resp.text().await.unwrap_or_default(), &path)),
        }
    }
}

/// An error answer as a sentence: the problem document's detail, or the status.
fn refused(method: &str, status: StatusCode, body: &str, path: &str) -> anyhow::Error {
    let detail = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|p| p["detail"].as_str().or(p["title"].as_str()).map(str::to_owned));
    let hint = if status == StatusCode::UNAUTHORIZED { " (--token, OPENQQ_TOKEN: is it this server's?)" } else { "" };
    anyhow!("{method} {path} answered {status}{}{hint}", detail.map_or(String::new(), |d| format!(": {d}")))
}
