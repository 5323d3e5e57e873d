//! `openqq-model-stub`: the scripted OpenAI-compatible test server as a process, for suites that
//! drive the platform from outside. Prints its base URL (`http://127.0.0.1:PORT/v1`) on stdout
//! once it accepts connections; runs until interrupted. Scripted through its control endpoints
//! (see `openqq_generation::test_server`).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use openqq_generation::test_server::{TestServer, TestServerOptions};

#[derive(Parser)]
#[command(about = "A scripted OpenAI-compatible model server answering from a directory of designs")]
struct Args {
    /// The designs directory: <DIR>/<design>/{design.v, broken_synth.v, not_equivalent.v, …}.
    #[arg(long)]
    designs: PathBuf,
    /// The bearer key required; any request is accepted without one.
    #[arg(long, env = "OPENQQ_MODEL_STUB_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Answer 400 to requests carrying response_format (clients fall back to fenced blocks).
    #[arg(long)]
    refuse_response_format: bool,
    /// The port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let options = TestServerOptions {
        api_key: args.api_key,
        refuse_response_format: args.refuse_response_format,
        ..TestServerOptions::new(args.designs)
    };
    let server = TestServer::bind(options, SocketAddr::from(([127, 0, 0, 1], args.port))).await?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", server.base_url())?;
    stdout.flush()?;
    drop(stdout);
    tokio::signal::ctrl_c().await?;
    Ok(())
}
