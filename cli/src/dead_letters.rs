//! `openqq dead-letters list|show|replay`: the records the consumer functions gave up on, read
//! from the dead-letter topic of the log `openqq up` uses (the embedded log in `--data-dir`, or
//! Kafka with `--kafka-brokers`; the same platform settings and environment variables), and
//! re-published to their source topics once the cause is fixed.
//!
//! A dead letter's id is where it sits in the dead-letter topic, `PARTITION:OFFSET`. A replay
//! publishes the original key, value and headers with a `replay-of` header naming the dead letter;
//! the function handles it again, and the replay rule lets it revive the revision its dead letter
//! failed (see `openqq_core::revision::plan_replay`). Replaying twice changes nothing more.
//!
//! The embedded log has one writer: replay into it while `openqq up` on that data dir is stopped
//! (the records are handled when it starts); a replay refuses a log another process has open.
//! `list` and `show` only read and work at any time.

use crate::dead_letters_format::{heading, replay_record, show, Filter, Letter, LetterId};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use openqq_adapters::embedded::WriterLock;
use openqq_core::{EventLog, LogSource};
use openqq_platform::{Platform, Settings};

/// Records read from the log per request while scanning the dead-letter topic.
const PAGE: usize = 200;

#[derive(Args)]
pub struct DeadLettersArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Print the dead letters, newest first, one line each.
    List(ListArgs),
    /// Print one dead letter whole: where it came from, why, its headers and its envelope.
    Show(ShowArgs),
    /// Publish dead letters to their source topics again, to be handled anew.
    Replay(ReplayArgs),
}

#[derive(Args)]
struct ListArgs {
    /// Only this tenant's dead letters.
    #[arg(long)]
    tenant: Option<String>,
    /// Only those this function gave up on (design-job, validation, results).
    #[arg(long)]
    function: Option<String>,
    /// Most dead letters printed (the newest).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
    #[command(flatten)]
    platform: Settings,
}

#[derive(Args)]
struct ShowArgs {
    /// The dead letter, PARTITION:OFFSET as `list` prints it.
    id: String,
    #[command(flatten)]
    platform: Settings,
}

#[derive(Args)]
struct ReplayArgs {
    /// The dead letters to replay, PARTITION:OFFSET each as `list` prints them.
    #[arg(required_unless_present = "all", conflicts_with = "all", num_args = 1..=1000)]
    ids: Vec<String>,
    /// Replay every dead letter (of `--tenant` only, when given), oldest first per partition.
    #[arg(long)]
    all: bool,
    /// With --all: only this tenant's dead letters.
    #[arg(long)]
    tenant: Option<String>,
    #[command(flatten)]
    platform: Settings,
}

pub fn run(args: DeadLettersArgs) -> Result<()> {
    openqq_platform::data_dir::owner_only();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        match args.action {
            Action::List(a) => list(a).await,
            Action::Show(a) => show_one(a).await,
            Action::Replay(a) => replay(a).await,
        }
    })
}

/// The platform's log, as `openqq up` would open it with these settings, and the dead-letter
/// topic's name with a hint for when it is empty because the data dir was new.
async fn open(settings: Settings) -> Result<(Platform, String, &'static str)> {
    let fresh = !settings.data_dir.exists();
    let platform = Platform::build(settings).await?;
    let topic = platform.topics.dead_letter();
    let hint = if fresh { " (the data dir did not exist before: is --data-dir that of `openqq up`?)" } else { "" };
    Ok((platform, topic, hint))
}

/// Reads every record of `topic`, partition by partition in offset order, handing each to `each`.
/// Returns how many there were.
async fn scan(source: &dyn LogSource, topic: &str, mut each: impl FnMut(Letter)) -> Result<u64> {
    let ends = source.end_offsets(topic).await.with_context(|| format!("reading the end of topic {topic}"))?;
    let mut seen = 0;
    for (partition, end) in ends.iter().enumerate() {
        let mut from = 0;
        while from < *end {
            let page = source
                .read(topic, partition as u32, from, PAGE)
                .await
                .with_context(|| format!("reading topic {topic} partition {partition}"))?;
            let Some(last) = page.last() else { break };
            from = last.offset + 1;
            for record in &page {
                seen += 1;
                each(Letter::read(record));
            }
        }
    }
    Ok(seen)
}

/// The dead letter `id`, or a sentence saying why there is none.
async fn fetch(source: &dyn LogSource, topic: &str, id: LetterId) -> Result<Letter> {
    let ends = source.end_offsets(topic).await.with_context(|| format!("reading the end of topic {topic}"))?;
    let Some(end) = ends.get(id.partition as usize) else {
        bail!(
            "there is no dead letter {id}: topic {topic} has {} partitions (0 to {})",
            ends.len(),
            ends.len().saturating_sub(1)
        );
    };
    if id.offset >= *end {
        bail!(
            "there is no dead letter {id}: partition {} of topic {topic} has no offset {} (its next offset is {end})",
            id.partition,
            id.offset
        );
    }
    let page =
        source.read(topic, id.partition, id.offset, 1).await.with_context(|| format!("reading dead letter {id}"))?;
    match page.first() {
        Some(record) if record.offset == id.offset => Ok(Letter::read(record)),
        _ => bail!("there is no dead letter {id} any more: retention deleted it from topic {topic}"),
    }
}

async fn list(args: ListArgs) -> Result<()> {
    let filter = Filter::parse(args.tenant.as_deref(), args.function.as_deref())?;
    let limit = args.limit as usize;
    let (platform, topic, hint) = open(args.platform).await?;
    let mut kept: Vec<Letter> = Vec::new();
    let newest_first = |kept: &mut Vec<Letter>| {
        kept.sort_by_key(|l| std::cmp::Reverse((l.dead.as_ref().ok().map(|d| d.dead_lettered_at), l.id)));
        kept.truncate(limit);
    };
    let mut matched = 0u64;
    let total = scan(platform.backends.source.as_ref(), &topic, |mut letter| {
        if filter.admits(&letter) {
            matched += 1;
            // A line needs what the envelope names, already read: the value (up to the record
            // limit each) is not kept.
            if let Ok(dead) = &mut letter.dead {
                dead.value = Vec::new();
            }
            kept.push(letter);
            if kept.len() >= 4 * limit {
                newest_first(&mut kept);
            }
        }
    })
    .await?;
    newest_first(&mut kept);
    if total == 0 {
        println!("No dead letters: topic {topic} is empty{hint}.");
        return Ok(());
    }
    if kept.is_empty() {
        println!("No dead letter matches ({total} in topic {topic}).");
        return Ok(());
    }
    println!("{}", heading());
    for letter in &kept {
        println!("{}", letter.line());
    }
    if matched > kept.len() as u64 {
        println!("({} of {matched} shown, newest first; --limit shows more)", kept.len());
    }
    Ok(())
}

async fn show_one(args: ShowArgs) -> Result<()> {
    let id: LetterId = args.id.parse()?;
    let (platform, topic, _) = open(args.platform).await?;
    let letter = fetch(platform.backends.source.as_ref(), &topic, id).await?;
    print!("{}", show(&letter, &topic));
    Ok(())
}

async fn replay(args: ReplayArgs) -> Result<()> {
    let mut ids = args.ids.iter().map(|s| s.parse::<LetterId>()).collect::<Result<Vec<_>, _>>()?;
    if args.tenant.is_some() && !args.all {
        bail!("--tenant chooses among all dead letters: use it with --all, or name the dead letters to replay");
    }
    let filter = Filter::parse(args.tenant.as_deref(), None)?;
    let _writer = only_writer(&args.platform).await?;
    let (platform, topic, hint) = open(args.platform).await?;
    let source = platform.backends.source.as_ref();
    if args.all {
        let total = scan(source, &topic, |letter| {
            if filter.admits(&letter) {
                ids.push(letter.id);
            }
        })
        .await?;
        if total == 0 {
            bail!("nothing to replay: topic {topic} is empty{hint}");
        }
        if ids.is_empty() {
            bail!("nothing to replay: none of the {total} dead letters in topic {topic} is the tenant's");
        }
    } else {
        // Every id is checked before anything is published.
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        for id in &ids {
            let letter = fetch(source, &topic, *id).await?;
            replay_record(&letter, &replay_topics(&platform))?;
        }
    }
    let (n, topics) = (ids.len(), replay_topics(&platform));
    let mut skipped = 0;
    for (i, id) in ids.iter().enumerate() {
        let letter = fetch(source, &topic, *id).await?;
        let (to, record) = match replay_record(&letter, &topics) {
            Ok(replay) => replay,
            // Only with --all: named ids were all checked above.
            Err(e) => {
                eprintln!("[{}/{n}] skipped: {e}", i + 1);
                skipped += 1;
                continue;
            }
        };
        publish(platform.backends.log.as_ref(), &to, record)
            .await
            .with_context(|| format!("replaying dead letter {id}"))?;
        let what = match &letter.named {
            Some(n) => format!(" (tenant {}, design {}, revision {}, {})", n.tenant, n.design, n.revision, n.kind),
            None => String::new(),
        };
        println!("[{}/{n}] replayed {id} to {to}{what}", i + 1);
    }
    let replayed = n - skipped;
    println!(
        "Replayed {replayed} dead letter{}; each is handled again by its function.",
        if replayed == 1 { "" } else { "s" }
    );
    if skipped > 0 {
        bail!("{skipped} of {n} dead letters could not be replayed (see above)");
    }
    Ok(())
}

/// Refuses to append to the embedded log while another process may: it has one writer, which
/// assigns offsets from what it appended itself, so a second writer's records would take the
/// offsets the running platform appends next (and make its appends fail). The lock it answers is
/// held until the replay ends, so `openqq up` cannot start in the middle of it. Kafka takes any
/// number of producers.
async fn only_writer(settings: &Settings) -> Result<Option<WriterLock>> {
    let topics = settings.topics().all();
    let kafka = openqq_platform::flags::kafka::settings(&settings.kafka, settings.partitions, topics).await?;
    if kafka.is_some() {
        return Ok(None);
    }
    Ok(Some(openqq_platform::local::writer_lock(&settings.data_dir)?))
}

/// The topics a replay may publish to: every topic of the platform but the dead-letter topic.
fn replay_topics(platform: &Platform) -> Vec<String> {
    let dead = platform.topics.dead_letter();
    platform.topics.all().into_iter().filter(|t| *t != dead).collect()
}

async fn publish(log: &dyn EventLog, topic: &str, record: openqq_core::Record) -> Result<()> {
    log.publish(topic, vec![record]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Cli;
    use clap::Parser;

    fn parses(args: &[&str]) -> Result<(), String> {
        let argv = ["openqq", "dead-letters"].iter().chain(args);
        Cli::try_parse_from(argv).map(|_| ()).map_err(|e| e.to_string())
    }

    #[test]
    fn replay_takes_ids_or_all_never_neither_nor_both() {
        assert!(parses(&["replay", "3:17", "0:1"]).is_ok());
        assert!(parses(&["replay", "--all", "--tenant", "acme"]).is_ok());
        assert!(parses(&["replay"]).unwrap_err().contains("required"));
        assert!(parses(&["replay", "3:17", "--all"]).unwrap_err().contains("cannot be used with"));
    }

    #[test]
    fn every_subcommand_takes_the_platforms_settings() {
        for sub in [&["list"][..], &["show", "0:1"], &["replay", "0:1"]] {
            let mut args = sub.to_vec();
            args.extend([
                "--data-dir",
                "d",
                "--partitions",
                "4",
                "--kafka-brokers",
                "127.0.0.1:9092",
                "--topic-prefix",
                "p.",
            ]);
            assert!(parses(&args).is_ok(), "{args:?}: {:?}", parses(&args));
        }
    }

    #[test]
    fn a_limit_outside_one_to_ten_thousand_is_refused() {
        assert!(parses(&["list", "--limit", "0"]).is_err());
        assert!(parses(&["list", "--limit", "10001"]).is_err());
        assert!(parses(&["list", "--limit", "10000", "--tenant", "acme", "--function", "results"]).is_ok());
    }
}
