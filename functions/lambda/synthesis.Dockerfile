# The synthesis and generation functions as container images for AWS Lambda: an openqq-lambda
# bin (`synthesis` by default; the generation function builds with `BIN=generation`) beside the
# tools they run on tenants' HDL (Yosys, Icarus Verilog), from the same Debian release the test
# command installs them from, so the deployed tools are the tested ones. The bin speaks the
# Lambda Runtime API itself (lambda_runtime), so any base image serves; no runtime interface
# client is needed. Built by `sam build` for each function's architecture (template.yaml,
# SynthesisFunction and GenerationFunction), from the repository root.
ARG BIN=synthesis

FROM rust:1.89-bookworm AS build
ARG BIN
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --locked --release -p openqq-lambda --bin ${BIN}

FROM debian:bookworm-slim
ARG BIN
RUN apt-get update \
    && apt-get install -y --no-install-recommends yosys iverilog ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/${BIN} /var/runtime/bootstrap
ENTRYPOINT ["/var/runtime/bootstrap"]
