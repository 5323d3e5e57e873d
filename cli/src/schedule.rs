//! `openqq schedule list|add|show|fires|pause|resume|trigger|backfill|delete`: a tenant's
//! schedules of batches, through the API with one tenant's token (`--url`, `--token`, as
//! `openqq batch`).
//!
//! `add NAME EXPRESSION` creates a schedule whose template is a fixed list of items
//! (`--items FILE.jsonl`, one design a line, as `openqq batch submit` reads them) or the
//! revalidation of stored designs (`--revalidate-all`, `--revalidate-prefix P`); a refused
//! schedule is said in terms of the argument at fault, and refused items with their lines in the
//! file. `fires ID` prints the ledger, every page of it. The formatting is pure
//! (`schedule_format.rs`); the requests go through the batch commands' client (`batch_api.rs`).

use crate::batch::ApiArgs;
use crate::batch_api::{BatchApi, Refused};
use crate::schedule_format::{self as format, OVERLAPS};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

/// Most schedules or fires one page of the API holds.
const PAGE: usize = 100;

#[derive(Args)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Print the tenant's schedules: expression, time zone, paused or not, next fire, template.
    List(ListArgs),
    /// Create a schedule that submits a batch on a timetable.
    Add(Box<AddArgs>),
    /// Print one schedule with its next five fires.
    Show(ShowArgs),
    /// Print a schedule's fire ledger, newest first: nominal time, fired at, outcome, batch, reason.
    Fires(FiresArgs),
    /// Pause a schedule: its fires do not run until it is resumed.
    Pause(IdArgs),
    /// Resume a paused schedule; fires count from now on (those while paused never run).
    Resume(IdArgs),
    /// Fire a schedule now (whatever its overlap policy or a pause), and say what was submitted.
    Trigger(IdArgs),
    /// Fire a schedule at every nominal time of a past range (at most 50, within 30 days).
    Backfill(BackfillArgs),
    /// Delete a schedule and its ledger (its batches stay).
    Delete(IdArgs),
}

#[derive(Args)]
struct ListArgs {
    /// Print each schedule as a JSON line instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct AddArgs {
    /// The schedule's name.
    name: String,
    /// When it fires: a 5-field cron read in --time-zone (`"30 2 * * *"`, quoted or as five
    /// words) or `rate(N minutes|hours|days)` from the schedule's creation.
    #[arg(required = true, num_args = 1.., value_name = "EXPRESSION")]
    expression: Vec<String>,
    /// The IANA time zone the cron expression is read in (the API's default: UTC).
    #[arg(long)]
    time_zone: Option<String>,
    #[command(flatten)]
    template: TemplateArgs,
    /// What a fire does while the schedule's previous batch runs: `skip` (the API's default),
    /// `buffer_one` (run once it ends) or `allow`.
    #[arg(long, value_parser = OVERLAPS)]
    overlap: Option<String>,
    /// How late a fire may still run after downtime, e.g. `30m` (the API's default: 1h);
    /// older ones are recorded missed.
    #[arg(long)]
    catch_up: Option<String>,
    /// Spread each fire over up to this long after its time, e.g. `5m`.
    #[arg(long)]
    jitter: Option<String>,
    /// Create it paused: nothing fires until `openqq schedule resume`.
    #[arg(long)]
    paused: bool,
    /// Print the schedule as the API's JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    api: ApiArgs,
}

/// What each fire submits: exactly one of these.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct TemplateArgs {
    /// A fixed batch: a JSON-lines file, one item a line (as `openqq batch submit` reads it),
    /// checked now and again at each fire.
    #[arg(long, value_name = "FILE.jsonl")]
    items: Option<PathBuf>,
    /// Revalidate every design of the tenant.
    #[arg(long)]
    revalidate_all: bool,
    /// Revalidate the tenant's designs whose name starts with this.
    #[arg(long, value_name = "PREFIX")]
    revalidate_prefix: Option<String>,
}

#[derive(Args)]
struct ShowArgs {
    /// The schedule's id, as `openqq schedule add` (POST /v1/schedules) answered it.
    id: String,
    /// Print the schedule as the API's JSON instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct FiresArgs {
    /// The schedule's id.
    id: String,
    /// Only the newest this many fires.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// Print each fire as a JSON line instead.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct IdArgs {
    /// The schedule's id.
    id: String,
    #[command(flatten)]
    api: ApiArgs,
}

#[derive(Args)]
struct BackfillArgs {
    /// The schedule's id.
    id: String,
    /// The range's start, an RFC 3339 time (`2026-03-02T06:00:00Z`), within the ledger's 30 days.
    #[arg(long)]
    from: String,
    /// The range's end (included), not in the future.
    #[arg(long)]
    to: String,
    #[command(flatten)]
    api: ApiArgs,
}

pub fn run(args: ScheduleArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        match args.action {
            Action::List(a) => list(a).await,
            Action::Add(a) => add(*a).await,
            Action::Show(a) => show(a).await,
            Action::Fires(a) => fires(a).await,
            Action::Pause(a) => set_paused(a, true).await,
            Action::Resume(a) => set_paused(a, false).await,
            Action::Trigger(a) => trigger(a).await,
            Action::Backfill(a) => backfill(a).await,
            Action::Delete(a) => delete(a).await,
        }
    })
}

/// The API and a schedule id as the user typed it, checked enough to be a path segment.
fn api_and_id<'a>(api: &ApiArgs, raw: &'a str) -> Result<(BatchApi, &'a str)> {
    let id = raw.trim();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        bail!("{raw:?} is not a schedule id (as `openqq schedule list` prints them)");
    }
    Ok((BatchApi::new(&api.url, &api.token)?, id))
}

/// A 404 as the sentence it means here.
fn not_found(e: anyhow::Error, id: &str) -> anyhow::Error {
    match e.downcast_ref::<Refused>() {
        Some(r) if r.status == StatusCode::NOT_FOUND => {
            anyhow!("schedule {id} was not found for this token's tenant")
        }
        _ => e,
    }
}

async fn list(args: ListArgs) -> Result<()> {
    let api = BatchApi::new(&args.api.url, &args.api.token)?;
    let mut all = Vec::new();
    let mut cursor = None::<String>;
    loop {
        let mut path = format!("/v1/schedules?limit={PAGE}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", format::query_value(c)));
        }
        let page = api.get(&path).await?;
        all.extend(page["schedules"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        for s in &all {
            writeln!(out, "{s}")?;
        }
    } else {
        write!(out, "{}", format::list(&all))?;
    }
    Ok(())
}

async fn add(args: AddArgs) -> Result<()> {
    let api = BatchApi::new(&args.api.url, &args.api.token)?;
    let t = &args.template;
    let (template, lines) = if let Some(file) = &t.items {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let text = String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", file.display()))?;
        let (items, lines) = format::template_items(&text).map_err(|bad| {
            anyhow!("{} holds lines that are not items (one JSON object a line):\n{bad}", file.display())
        })?;
        if items.is_empty() {
            bail!("{} holds no items: one JSON object a line", file.display());
        }
        (json!({ "items": items }), Some(lines))
    } else if let Some(prefix) = &t.revalidate_prefix {
        (json!({ "revalidate": { "name_prefix": prefix } }), None)
    } else if t.revalidate_all {
        (json!({ "revalidate": "all" }), None)
    } else {
        bail!("say what each fire submits: --items FILE.jsonl, --revalidate-all or --revalidate-prefix PREFIX");
    };
    let mut body = json!({ "name": args.name, "expression": args.expression.join(" "), "template": template });
    for (field, value) in [
        ("time_zone", &args.time_zone),
        ("overlap", &args.overlap),
        ("catch_up", &args.catch_up),
        ("jitter", &args.jitter),
    ] {
        if let Some(v) = value {
            body[field] = json!(v);
        }
    }
    if args.paused {
        body["paused"] = json!(true);
    }
    let created =
        api.call(Method::POST, "/v1/schedules", Some(&body)).await.map_err(|e| match e.downcast::<Refused>() {
            Ok(r) => match format::refused(&r.problem, lines.as_deref()) {
                Some(said) if r.status == StatusCode::UNPROCESSABLE_ENTITY => {
                    eprint!("{said}");
                    anyhow!("the schedule {} was not created", args.name)
                }
                _ if r.status == StatusCode::PAYLOAD_TOO_LARGE => anyhow!(
                    "{r}: a schedule's items go in the request, so they must fit the API's body limit \
                 (--max-body-bytes); make fewer or smaller items"
                ),
                _ => r.into(),
            },
            Err(e) => e,
        })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&created)?);
        return Ok(());
    }
    print!("{}", format::show(&created));
    Ok(())
}

async fn show(args: ShowArgs) -> Result<()> {
    let (api, id) = api_and_id(&args.api, &args.id)?;
    let schedule = api.get(&format!("/v1/schedules/{id}")).await.map_err(|e| not_found(e, id))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&schedule)?);
    } else {
        print!("{}", format::show(&schedule));
    }
    Ok(())
}

async fn fires(args: FiresArgs) -> Result<()> {
    let (api, id) = api_and_id(&args.api, &args.id)?;
    let max = args.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let (mut all, mut after) = (Vec::new(), None::<String>);
    loop {
        let limit = max.map_or(PAGE, |m| m.saturating_sub(all.len()).clamp(1, PAGE));
        let mut path = format!("/v1/schedules/{id}/fires?limit={limit}");
        if let Some(a) = &after {
            path.push_str(&format!("&after={}", format::query_value(a)));
        }
        let page = api.get(&path).await.map_err(|e| not_found(e, id))?;
        all.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) if max.is_none_or(|m| all.len() < m) => after = Some(next.to_owned()),
            _ => break,
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        for f in &all {
            writeln!(out, "{f}")?;
        }
    } else if all.is_empty() {
        writeln!(out, "Schedule {id} has not fired yet (`openqq schedule trigger {id}` fires it now).")?;
    } else {
        write!(out, "{}", format::fires(&all))?;
    }
    Ok(())
}

async fn set_paused(args: IdArgs, paused: bool) -> Result<()> {
    let (api, id) = api_and_id(&args.api, &args.id)?;
    let path = format!("/v1/schedules/{id}");
    let after =
        api.call(Method::PATCH, &path, Some(&json!({ "paused": paused }))).await.map_err(|e| not_found(e, id))?;
    print!("{}", format::show(&after));
    Ok(())
}

async fn trigger(args: IdArgs) -> Result<()> {
    let (api, id) = api_and_id(&args.api, &args.id)?;
    let fire =
        api.call(Method::POST, &format!("/v1/schedules/{id}/trigger"), None).await.map_err(|e| not_found(e, id))?;
    print!("{}", format::fired(&fire));
    match fire["outcome"].as_str() {
        Some("failed") => bail!("the fire of schedule {id} failed"),
        _ => Ok(()),
    }
}

async fn backfill(args: BackfillArgs) -> Result<()> {
    let (api, id) = api_and_id(&args.api, &args.id)?;
    let body = json!({ "from": args.from, "to": args.to });
    let done = api.call(Method::POST, &format!("/v1/schedules/{id}/backfill"), Some(&body)).await;
    let done = done.map_err(|e| match e.downcast::<Refused>() {
        Ok(r) if r.status == StatusCode::UNPROCESSABLE_ENTITY && r.problem["field"].is_string() => {
            let field = r.problem["field"].as_str().unwrap_or_default();
            let detail = r.problem["detail"].as_str().unwrap_or_default();
            let flag = if field == "from" || field == "to" { format!(" (--{field})") } else { String::new() };
            anyhow!("the backfill was refused: {detail}{flag}")
        }
        Ok(r) => not_found(r.into(), id),
        Err(e) => e,
    })?;
    let fires = done["fires"].as_array().map_or(&[][..], Vec::as_slice);
    if fires.is_empty() {
        println!("Schedule {id} has no nominal time between {} and {}: nothing fired.", args.from, args.to);
    } else {
        print!("{}", format::fires(fires));
    }
    Ok(())
}

async fn delete(args: IdArgs) -> Result<()> {
    let (api, id) = api_and_id(&args.api, &args.id)?;
    api.call(Method::DELETE, &format!("/v1/schedules/{id}"), None).await.map_err(|e| not_found(e, id))?;
    println!("Schedule {id} was deleted, with its ledger; the batches it submitted stay.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Cli, Command};
    use clap::Parser;

    fn add(args: &[&str]) -> Result<super::AddArgs, clap::Error> {
        let argv = ["openqq", "schedule", "add", "nightly"].iter().chain(args).chain(&["--token", "t"]);
        match Cli::try_parse_from(argv)?.command {
            Command::Schedule(s) => match s.action {
                super::Action::Add(a) => Ok(*a),
                _ => unreachable!("parsed as another schedule command"),
            },
            _ => unreachable!("parsed as another command"),
        }
    }

    #[test]
    fn add_takes_exactly_one_template_and_an_expression_quoted_or_as_words() {
        let quoted = add(&["30 2 * * *", "--revalidate-all"]).unwrap();
        assert_eq!(quoted.expression.join(" "), "30 2 * * *");
        let words = add(&["30", "2", "*", "*", "*", "--items", "n.jsonl", "--overlap", "allow"]).unwrap();
        assert_eq!((words.expression.join(" "), words.overlap.as_deref()), ("30 2 * * *".to_owned(), Some("allow")));
        for bad in [
            &["0 * * * *"][..],
            &["0 * * * *", "--revalidate-all", "--items", "n.jsonl"],
            &["0 * * * *", "--revalidate-prefix", "a", "--revalidate-all"],
            &["--revalidate-all"],
            &["0 * * * *", "--revalidate-all", "--overlap", "sometimes"],
        ] {
            assert!(add(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
