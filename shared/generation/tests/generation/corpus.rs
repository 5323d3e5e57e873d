//! The server over the HDL corpus the platform's checks use (`shared/hdl/corpus`).

use std::path::Path;

use openqq_core::generation::{GenerationBackend, GenerationRequest};
use openqq_generation::test_server::{TestServer, TestServerOptions};
use openqq_generation::{OpenAiBackend, OpenAiSettings};

#[tokio::test]
async fn every_corpus_design_is_answered_with_its_own_design_file_and_top() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../hdl/corpus");
    if !corpus.is_dir() {
        eprintln!("no HDL corpus at {}: nothing to check", corpus.display());
        return;
    }
    let server = TestServer::start(TestServerOptions::new(&corpus)).await.unwrap();
    let backend = OpenAiBackend::new(OpenAiSettings::new(server.base_url(), "stub-model")).unwrap();
    let designs = server.designs();
    assert!(!designs.is_empty());
    for name in designs {
        let generated = backend.generate(&GenerationRequest::new(format!("Build the {name}."), "ice40")).await.unwrap();
        let expected = std::fs::read_to_string(corpus.join(&name).join("design.v")).unwrap();
        assert_eq!(generated.verilog, expected, "{name}");
        assert_eq!(generated.top, name);
    }
}
