//! What a report points at, kept as objects of the tenant (`GET /v1/objects/{digest}`): the
//! files the checks read, so the web UI and `openqq design show` can show a design's source
//! beside its verdicts, and each failing testbench's waveform (`openqq_hdl::Waveform`).

use openqq_core::hdl::{Source, SourceFile, Testbench};
use openqq_core::{ObjectRef, ObjectStore, PortError, TenantId};
use serde::Serialize;

/// The inputs of one run of the checks, as given.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub source: Source,
    pub tests: Vec<Testbench>,
    pub reference: Option<Source>,
}

/// One file, by name and reference.
#[derive(Debug, Clone, Serialize)]
pub struct KeptFile {
    pub name: String,
    /// `digest` and `bytes`.
    #[serde(flatten)]
    pub object: ObjectRef,
}

/// A top module and its files.
#[derive(Debug, Clone, Serialize)]
pub struct KeptSet {
    pub top: String,
    pub files: Vec<KeptFile>,
}

/// A testbench's files.
#[derive(Debug, Clone, Serialize)]
pub struct KeptTest {
    pub testbench: String,
    #[serde(flatten)]
    pub set: KeptSet,
}

/// The report's `source`: the design's top and files, then each testbench's and the
/// reference's.
#[derive(Debug, Clone, Serialize)]
pub struct Sources {
    #[serde(flatten)]
    pub design: KeptSet,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tests: Vec<KeptTest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference: Option<KeptSet>,
}

/// Stores every file of `inputs` for `tenant` (an object per distinct text: a file given again
/// is the same object).
pub async fn sources(objects: &dyn ObjectStore, tenant: &TenantId, inputs: &Inputs) -> Result<Sources, PortError> {
    let mut tests = Vec::with_capacity(inputs.tests.len());
    for test in &inputs.tests {
        let set = set(objects, tenant, &test.files, &test.top).await?;
        tests.push(KeptTest { testbench: test.name.clone(), set });
    }
    let reference = match &inputs.reference {
        Some(r) => Some(set(objects, tenant, &r.files, &r.top).await?),
        None => None,
    };
    let design = set(objects, tenant, &inputs.source.files, &inputs.source.top).await?;
    Ok(Sources { design, tests, reference })
}

async fn set(
    objects: &dyn ObjectStore,
    tenant: &TenantId,
    files: &[SourceFile],
    top: &str,
) -> Result<KeptSet, PortError> {
    let mut kept = Vec::with_capacity(files.len());
    for file in files {
        let object = objects.put(tenant, file.text.clone().into_bytes()).await?;
        kept.push(KeptFile { name: file.name.clone(), object });
    }
    Ok(KeptSet { top: top.to_owned(), files: kept })
}
