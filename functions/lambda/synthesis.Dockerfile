# The synthesis function as a container image for AWS Lambda: the openqq-lambda bin `synthesis`
# beside the tools it runs on tenants' HDL (Yosys, Icarus Verilog), from the same Debian release
# the test command installs them from, so the deployed tools are the tested ones. The bin speaks
# the Lambda Runtime API itself (lambda_runtime), so any base image serves; no runtime interface
# client is needed. Built by `sam build` for the function's architecture (template.yaml,
# SynthesisFunction), from the repository root.
FROM rust:1.89-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --locked --release -p openqq-lambda --bin synthesis

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends yosys iverilog ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/synthesis /var/runtime/bootstrap
ENTRYPOINT ["/var/runtime/bootstrap"]
