//! `openqq token --tenant T`: a bearer token signed with the local secret.

use crate::secret;
use anyhow::{Context, Result};
use clap::Args;
use openqq_api::auth::ClaimRules;
use openqq_api::JwtKeys;
use openqq_core::TenantId;
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

/// Claims every token must carry, shared by `openqq up` (which requires them) and `openqq
/// token` (which writes them).
#[derive(Args, Clone, Default)]
pub struct JwtRuleArgs {
    /// When set, tokens must carry this `iss` claim (and `openqq token` writes it).
    #[arg(long, env = "OPENQQ_JWT_ISSUER")]
    jwt_issuer: Option<String>,
    /// When set, tokens must carry this `aud` claim (and `openqq token` writes it).
    #[arg(long, env = "OPENQQ_JWT_AUDIENCE")]
    jwt_audience: Option<String>,
}

impl JwtRuleArgs {
    pub fn rules(&self) -> ClaimRules {
        let set = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
        ClaimRules { issuer: set(&self.jwt_issuer), audience: set(&self.jwt_audience) }
    }
}

pub fn run(args: TokenArgs) -> Result<()> {
    let tenant = TenantId::parse(args.tenant).context("--tenant")?;
    let keys = JwtKeys::with_rules(&secret::load_or_create(&args.data_dir)?, args.rules.rules())
        .map_err(anyhow::Error::msg)?;
    println!("{}", keys.issue(&tenant, args.ttl));
    Ok(())
}
