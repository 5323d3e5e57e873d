//! `openqq token --tenant T`: a bearer token signed with the local secret.

use anyhow::{Context, Result};
use clap::Args;
use openqq_api::JwtKeys;
use openqq_core::TenantId;
use openqq_platform::{secret, JwtRuleArgs};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args)]
pub struct TokenArgs {
    /// The tenant the token speaks for.
    #[arg(long)]
    tenant: String,
    /// Where the local secret lives (ignored when OPENQQ_JWT_SECRET is set).
    #[arg(long, env = "OPENQQ_DATA_DIR", default_value = ".openqq")]
    data_dir: PathBuf,
    /// How long the token stays valid.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    ttl: Duration,
    #[command(flatten)]
    rules: JwtRuleArgs,
}

pub fn run(args: TokenArgs) -> Result<()> {
    let tenant = TenantId::parse(args.tenant).context("--tenant")?;
    if args.ttl > args.rules.jwt_max_lifetime {
        anyhow::bail!(
            "--ttl {} is longer than tokens may live (--jwt-max-lifetime {}): the API would refuse it",
            humantime::format_duration(args.ttl),
            humantime::format_duration(args.rules.jwt_max_lifetime)
        );
    }
    let keys = JwtKeys::with_rules(&secret::load_or_create(&args.data_dir)?, args.rules.rules())?;
    println!("{}", keys.issue(&tenant, args.ttl));
    Ok(())
}
