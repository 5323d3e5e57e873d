//! The DynamoDB flags of `openqq up`, which are also the environment of a function on Lambda
//! (`OPENQQ_DYNAMODB_TABLE`, `OPENQQ_DYNAMODB_ENDPOINT`): whether the design store is on one
//! DynamoDB table, and where that table is served. The standard `AWS_REGION` and
//! `AWS_ENDPOINT_URL` work through the AWS SDK.
//!
//! The values are checked before anything is opened or connected; a bad one stops the process
//! with a sentence naming the setting.

use anyhow::{bail, Result};
use clap::Args;

/// The DynamoDB flags; each has an environment variable too.
#[derive(Args, Clone, Debug, Default)]
pub struct DynamoArgs {
    /// Put the design store (designs, timelines, reports, idempotency keys, usage) on this
    /// DynamoDB table. The event log and the limiter stay as chosen by their own flags. Against
    /// AWS the table must exist; with --dynamodb-endpoint (or AWS_ENDPOINT_URL) a missing one is
    /// created.
    #[arg(long, env = "OPENQQ_DYNAMODB_TABLE")]
    pub dynamodb_table: Option<String>,
    /// A DynamoDB endpoint other than AWS's, e.g. http://127.0.0.1:5000 (a local server).
    #[arg(long, env = "OPENQQ_DYNAMODB_ENDPOINT")]
    pub dynamodb_endpoint: Option<String>,
}

/// The table setting's name, as the messages give it.
const TABLE: &str = "--dynamodb-table (OPENQQ_DYNAMODB_TABLE)";
/// The endpoint setting's name, as the messages give it.
const ENDPOINT: &str = "--dynamodb-endpoint (OPENQQ_DYNAMODB_ENDPOINT)";

impl DynamoArgs {
    /// The table and endpoint, checked; `None` when the store stays embedded. Pure.
    fn checked(&self) -> Result<Option<(String, Option<String>)>> {
        let Some(table) = &self.dynamodb_table else {
            if self.dynamodb_endpoint.is_some() {
                bail!("{ENDPOINT} says where the DynamoDB store is served, which needs {TABLE}");
            }
            return Ok(None);
        };
        if !valid_table_name(table) {
            bail!("{TABLE} must be a DynamoDB table name of 3 to 255 letters, digits, '_', '-' or '.', not {table:?}");
        }
        if let Some(endpoint) = &self.dynamodb_endpoint {
            super::endpoint::check(ENDPOINT, endpoint)?;
        }
        Ok(Some((table.clone(), self.dynamodb_endpoint.clone())))
    }
}

/// What DynamoDB accepts as a table name (the adapter checks the same).
fn valid_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(feature = "dynamodb")]
pub type DynamoSettings = openqq_adapters::DynamoSettings;
#[cfg(not(feature = "dynamodb"))]
pub type DynamoSettings = std::convert::Infallible;

/// The DynamoDB settings the flags ask for, checked; `None` when the store stays embedded.
#[cfg(feature = "dynamodb")]
pub fn settings(args: &DynamoArgs) -> Result<Option<DynamoSettings>> {
    Ok(args.checked()?.map(|(table, endpoint)| DynamoSettings { table, endpoint }))
}

/// Without the `dynamodb` feature, the DynamoDB flags are refused.
#[cfg(not(feature = "dynamodb"))]
pub fn settings(args: &DynamoArgs) -> Result<Option<DynamoSettings>> {
    if args.checked()?.is_some() {
        bail!("{TABLE} and {ENDPOINT} need an openqq built with the `dynamodb` feature");
    }
    Ok(None)
}

/// The design store on DynamoDB when `settings` says so (`None` when it stays embedded), keeping
/// what goes by age as `retention` says. A table that cannot be reached, or is missing on AWS, stops
/// start-up with a sentence naming the setting.
#[cfg(feature = "dynamodb")]
pub async fn connect(
    settings: Option<DynamoSettings>,
    retention: openqq_core::StoreRetention,
) -> Result<Option<std::sync::Arc<dyn openqq_core::DesignStore>>> {
    use anyhow::Context;
    let Some(settings) = settings else { return Ok(None) };
    let where_ = settings.endpoint.as_deref().unwrap_or("AWS");
    let store = openqq_adapters::DynamoDesignStore::connect(&settings).await.with_context(|| {
        format!("putting the design store on the DynamoDB table {} ({TABLE}) at {where_}", settings.table)
    })?;
    tracing::info!(table = settings.table, endpoint = where_, "The design store is on DynamoDB.");
    Ok(Some(std::sync::Arc::new(store.with_retention(retention))))
}

#[cfg(not(feature = "dynamodb"))]
pub async fn connect(
    settings: Option<DynamoSettings>,
    _retention: openqq_core::StoreRetention,
) -> Result<Option<std::sync::Arc<dyn openqq_core::DesignStore>>> {
    match settings {
        Some(never) => match never {},
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(table: Option<&str>, endpoint: Option<&str>) -> DynamoArgs {
        DynamoArgs { dynamodb_table: table.map(Into::into), dynamodb_endpoint: endpoint.map(Into::into) }
    }

    #[test]
    fn no_table_keeps_the_store_embedded_and_a_table_with_an_endpoint_is_taken() {
        assert_eq!(args(None, None).checked().unwrap(), None);
        assert_eq!(
            args(Some("openqq-designs"), Some("http://127.0.0.1:5000")).checked().unwrap(),
            Some(("openqq-designs".into(), Some("http://127.0.0.1:5000".into())))
        );
        assert_eq!(args(Some("t.1_x"), None).checked().unwrap(), Some(("t.1_x".into(), None)));
        for ok in ["https://dynamodb.eu-west-1.amazonaws.com", "http://localhost:8000/", "http://[::1]:5000"] {
            args(Some("ttt"), Some(ok)).checked().unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
    }

    #[test]
    fn a_bad_value_is_refused_with_a_sentence_naming_the_setting() {
        for (table, endpoint, setting) in [
            (Some(""), None, "--dynamodb-table"),
            (Some("ab"), None, "--dynamodb-table"),
            (Some("has space"), None, "--dynamodb-table"),
            (Some("t#1"), None, "--dynamodb-table"),
            (Some("ok-table"), Some("not a url"), "--dynamodb-endpoint"),
            (Some("ok-table"), Some("127.0.0.1:5000"), "--dynamodb-endpoint"),
            (Some("ok-table"), Some("ftp://host"), "--dynamodb-endpoint"),
            (Some("ok-table"), Some("http://"), "--dynamodb-endpoint"),
            (Some("ok-table"), Some("http://host:port"), "--dynamodb-endpoint"),
            (Some("ok-table"), Some("http://[::1]x"), "--dynamodb-endpoint"),
            (None, Some("http://127.0.0.1:5000"), "needs --dynamodb-table"),
        ] {
            let message = args(table, endpoint).checked().expect_err("refused").to_string();
            assert!(message.contains(setting), "{table:?} {endpoint:?}: {message}");
        }
    }
}
