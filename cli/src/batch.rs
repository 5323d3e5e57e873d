//! `openqq batch submit|status|items|cancel`: many designs as one batch, through the API with one
//! tenant's token (`--url`, `--token`, as `openqq design show`).
//!
//! `submit FILE.jsonl` sends the file's lines as they are (`application/x-ndjson`), or as an
//! upload named by `items_ref` when the file is larger than the API takes inline; a refused batch
//! prints each refused item (index, line, custom_id, reason) and exits 1. With `--wait` it follows
//! the batch to its end with a progress line on stderr (redrawn in place on a terminal, a line
//! every few seconds otherwise) and prints a summary: counts, verdicts, how long it took, and the
//! first failed or rejected items with their reasons. The formatting is pure (`batch_format.rs`);
//! the requests are `batch_api.rs`.

use crate::batch_api::{BatchApi, Options, Refused, DEFAULT_INLINE_LIMIT, MAX_UPLOAD_BYTES};
use crate::batch_format::{self as format, is_final, Rate};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use reqwest::StatusCode;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How often `--wait` reads the batch.
const POLL: Duration = Duration::from_secs(1);
/// How often `--wait` prints a progress line when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(5);
/// How long `--wait` keeps trying while the API cannot be reached or asks it to slow down.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);
/// Failed and rejected items the summary lists.
const LISTED: usize = 20;

#[derive(Args)]
pub struct BatchArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Submit a JSON-lines file, one design a line (the body of POST /v1/designs, with an
    /// optional custom_id; or design_id and revision for a new revision).
    Submit(SubmitArgs),
    /// Print a batch: its status, times, counts by item status and verdicts.
    Status(StatusArgs),
    /// Print every item of a batch: index, custom_id, design_id, status, verdict.
    Items(ItemsArgs),
    /// Stop the items of a batch not yet started (those on their way finish).
    Cancel(CancelArgs),
}

/// Where the API is and whose batches (or schedules) to ask for.
#[derive(Args)]
pub(crate) struct ApiArgs {
    /// The API's address.
    #[arg(long, env = "OPENQQ_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// A bearer token of the tenant (`openqq token --tenant T` makes one for `openqq up`).
    #[arg(long, env = "OPENQQ_TOKEN", hide_env_values = true)]
    pub token: String,
}

#[derive(Args)]
struct SubmitArgs {
    /// The items, one JSON object a line (blank lines are skipped).
    file: PathBuf,
    /// The batch's name (default: the file's name without its extension).
    #[arg(long)]
    name: Option<String>,
    /// What an invalid item does: `reject` refuses the whole batch (the API's default), `skip`
    /// submits the others and marks it rejected.
    #[arg(long, value_parser = ["reject", "skip"])]
    on_invalid: Option<String>,
    /// Failed items tolerated before the rest is cancelled: a count (`5`) or a percentage (`10%`).
    #[arg(long, value_parser = max_failed)]
    max_failed: Option<String>,
    /// Follow the batch to its end, then print a summary; exit 1 when it failed or was cancelled.
    #[arg(long)]
    wait: bool,
    /// Files larger than this go as an upload (POST /v1/uploads) rather than in the request: the
    /// API's --max-body-bytes. A file the API answers 413 for is uploaded anyway.
    #[arg(long, env = "OPENQQ_MAX_BODY_BYTES", default_value_t = DEFAULT_INLINE_LIMIT)]
    max_body_bytes: u64,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct StatusArgs {
    /// The batch's id, as `openqq batch submit` (POST /v1/batches) answered it.
    id: String,
    /// Print the batch as the API's JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct ItemsArgs {
    /// The batch's id.
    id: String,
    /// Only the items with this status.
    #[arg(long, value_parser = format::STATUSES)]
    status: Option<String>,
    /// Print each item as a JSON line instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct CancelArgs {
    /// The batch's id.
    id: String,
    #[command(flatten)]
    api: ApiArgs,
}

/// `5` or `10%`, as the API reads `max_failed`.
fn max_failed(s: &str) -> Result<String, String> {
    let ok = match s.strip_suffix('%') {
        Some(pct) => pct.parse::<u8>().is_ok_and(|p| p <= 100),
        None => s.parse::<u64>().is_ok(),
    };
    ok.then(|| s.to_owned()).ok_or_else(|| format!("{s:?} is neither a count (5) nor a percentage (10%)"))
}

pub fn run(args: BatchArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        match args.action {
            Action::Submit(a) => submit(a).await,
            Action::Status(a) => status(a).await,
            Action::Items(a) => items(a).await,
            Action::Cancel(a) => cancel(a).await,
        }
    })
}

/// A batch id as the user typed it, checked enough to be a path segment.
fn batch_id(raw: &str) -> Result<&str> {
    let id = raw.trim();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("{raw:?} is not a batch id");
    }
    Ok(id)
}

/// A 404 as the sentence it means here.
fn not_found(e: anyhow::Error, id: &str) -> anyhow::Error {
    match e.downcast_ref::<Refused>() {
        Some(r) if r.status == StatusCode::NOT_FOUND => anyhow!("batch {id} was not found for this token's tenant"),
        _ => e,
    }
}

async fn submit(args: SubmitArgs) -> Result<()> {
    let api = BatchApi::new(&args.api.url, &args.api.token)?;
    let bytes = std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let lines = format::item_lines(&String::from_utf8_lossy(&bytes));
    if lines.is_empty() {
        bail!("{} holds no items: one JSON object a line", args.file.display());
    }
    let name = match args.name {
        Some(n) => n,
        None => args.file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "batch".into()),
    };
    let options = Options { name, on_invalid: args.on_invalid, max_failed: args.max_failed };
    let size = bytes.len() as u64;
    if size > MAX_UPLOAD_BYTES {
        bail!("{} is {size} bytes; the API takes at most 64 MiB of items: split it", args.file.display());
    }
    let accepted = if size > args.max_body_bytes {
        api.submit_uploaded(&options, bytes).await
    } else {
        match api.submit_inline(&options, bytes.clone()).await {
            Err(e) if e.downcast_ref::<Refused>().is_some_and(|r| r.status == StatusCode::PAYLOAD_TOO_LARGE) => {
                api.submit_uploaded(&options, bytes).await
            }
            answer => answer,
        }
    };
    let accepted = accepted.map_err(|e| match e.downcast::<Refused>() {
        Ok(r) if r.problem["type"] == "urn:openqq:problem:invalid-items" => {
            eprint!("{}", format::refused(&r.problem, Some(&lines)));
            anyhow!("the batch in {} was refused", args.file.display())
        }
        Ok(r) => r.into(),
        Err(e) => e,
    })?;
    let id = batch_id(accepted["batch_id"].as_str().context("the API answered no batch_id")?)?.to_owned();
    println!(
        "Batch {id} accepted: {} items, {} rejected as invalid.",
        accepted["items"].as_u64().unwrap_or(0),
        accepted["rejected"].as_u64().unwrap_or(0)
    );
    if !args.wait {
        println!("Follow it with: openqq batch status {id}");
        return Ok(());
    }
    let batch = wait(&api, &id).await?;
    let (listed, total) = failed_items(&api, &id, &batch).await?;
    print!("{}", format::summary(&batch, &listed, total));
    match batch["status"].as_str() {
        Some("completed") => Ok(()),
        other => bail!("batch {id} ended {}", other.unwrap_or("?")),
    }
}

/// Reads the batch every [`POLL`] until it is final, drawing progress on stderr; waits out rate
/// limits and short outages (up to [`GIVE_UP_AFTER`] without an answer).
async fn wait(api: &BatchApi, id: &str) -> Result<Value> {
    let terminal = std::io::stderr().is_terminal();
    let began = Instant::now();
    let (mut rate, mut last_log, mut last_ok) = (Rate::default(), None::<Instant>, Instant::now());
    loop {
        let batch = match api.get(&format!("/v1/batches/{id}")).await {
            Ok(b) => b,
            Err(e) if retriable(&e) && last_ok.elapsed() < GIVE_UP_AFTER => {
                tokio::time::sleep(POLL * 2).await;
                continue;
            }
            Err(e) => return Err(not_found(e, id)),
        };
        last_ok = Instant::now();
        rate.observe(began.elapsed().as_secs_f64(), format::Tally::of(&batch).done);
        let line = format::progress_line(&batch, rate.per_sec());
        let done = batch["status"].as_str().is_some_and(is_final);
        let mut err = std::io::stderr().lock();
        if terminal {
            let _ = write!(err, "\r{line}\x1b[K{}", if done { "\n" } else { "" });
        } else if done || last_log.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
            let _ = writeln!(err, "{line}");
            last_log = Some(Instant::now());
        }
        let _ = err.flush();
        if done {
            return Ok(batch);
        }
        drop(err);
        tokio::time::sleep(POLL).await;
    }
}

/// Whether asking again may help: the API was unreachable, asked to slow down, or was briefly
/// unavailable.
fn retriable(e: &anyhow::Error) -> bool {
    match e.downcast_ref::<Refused>() {
        Some(r) => matches!(r.status.as_u16(), 429 | 502 | 503 | 504),
        None => e.downcast_ref::<reqwest::Error>().is_some_and(|r| r.is_connect() || r.is_timeout()),
    }
}

/// The first [`LISTED`] failed or rejected items in index order, each with a reason (a failed
/// item's is its design's `failure_reason`), and how many there are.
async fn failed_items(api: &BatchApi, id: &str, batch: &Value) -> Result<(Vec<Value>, u64)> {
    let count = |s: &str| batch["counts"][s].as_u64().unwrap_or(0);
    let total = count("failed") + count("rejected");
    let mut listed = Vec::new();
    for status in ["failed", "rejected"] {
        if count(status) > 0 {
            api.items(id, Some(status), Some(LISTED), |page| listed.extend(page)).await?;
        }
    }
    listed.sort_by_key(|i| i["index"].as_u64());
    listed.truncate(LISTED);
    for item in listed.iter_mut().filter(|i| i["reason"].is_null()) {
        let Some(design) = item["design_id"].as_str().map(str::to_owned) else { continue };
        if let Ok(d) = api.get(&format!("/v1/designs/{design}")).await {
            item["reason"] = d["failure_reason"].clone();
        }
    }
    Ok((listed, total))
}

async fn status(args: StatusArgs) -> Result<()> {
    let api = BatchApi::new(&args.api.url, &args.api.token)?;
    let id = batch_id(&args.id)?;
    let batch = api.get(&format!("/v1/batches/{id}")).await.map_err(|e| not_found(e, id))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&batch)?);
    } else {
        print!("{}", format::status(&batch));
    }
    Ok(())
}

async fn items(args: ItemsArgs) -> Result<()> {
    let api = BatchApi::new(&args.api.url, &args.api.token)?;
    let id = batch_id(&args.id)?;
    let mut all = Vec::new();
    let mut out = std::io::stdout().lock();
    let listed = api
        .items(id, args.status.as_deref(), None, |page| {
            if args.json {
                for item in &page {
                    let _ = writeln!(out, "{item}");
                }
            } else {
                all.extend(page);
            }
        })
        .await;
    listed.map_err(|e| not_found(e, id))?;
    if !args.json {
        if all.is_empty() {
            let with = args.status.as_deref().map_or(String::new(), |s| format!(" with status {s}"));
            writeln!(out, "No items{with}.")?;
        } else {
            write!(out, "{}", format::items(&all))?;
        }
    }
    Ok(())
}

async fn cancel(args: CancelArgs) -> Result<()> {
    let api = BatchApi::new(&args.api.url, &args.api.token)?;
    let id = batch_id(&args.id)?;
    // A batch that has ended keeps its status: there is nothing left to stop.
    let before = api.get(&format!("/v1/batches/{id}")).await.map_err(|e| not_found(e, id))?;
    if let Some(ended) = before["status"].as_str().filter(|s| is_final(s)) {
        print!("{}", format::status(&before));
        println!("Batch {id} has ended ({ended}): nothing to cancel.");
        return Ok(());
    }
    let batch = api.cancel(id).await.map_err(|e| not_found(e, id))?;
    print!("{}", format::status(&batch));
    Ok(())
}
