#!/usr/bin/env python3
"""The capacity plan's simulator (docs/CAPACITY.md): per-design costs in, the AWS deployment at
1x, 10x, 100x and 1000x the seed's volume out.

    python3 scripts/capacity.py               # the tables docs/CAPACITY.md shows
    python3 scripts/capacity.py --json        # the same numbers for machines
    python3 scripts/capacity.py --inputs      # every input with its kind and source
    python3 scripts/capacity.py --set hot_tenant_share=0.05 --set dynamo_rtt_ms=8
    python3 scripts/capacity.py --inputs-file costs.json   # {"name": value, ...} over the defaults
    python3 scripts/capacity.py --check       # the model's own consistency, no fixed outputs
    python3 scripts/capacity.py --measure-logs $CARGO_TARGET_DIR/release/openqq   # the log inputs

Every number printed is computed here from INPUTS. Each input says what it is: `measured` (on
the project's 2-vCPU development machine, docs/BENCHMARKS.md), `counted` (read off the code or the
template: how many writes, records or calls one design makes), `assumption` (a figure not
measured here: AWS latencies, shares of traffic), or `price` (AWS list prices, us-east-1, as
docs/DEPLOY.md states them, or as noted). Python's standard library only.
"""

import argparse
import json
import math
import sys

M, A, C, P = "measured", "assumption", "counted", "price"

# name: (value, unit, kind, source)
INPUTS = {
    # --- volume -------------------------------------------------------------------------
    "seed_events_per_day": (50_000, "events/day", A, "issue 26 / DESIGN.md §1: tens of thousands of events a day"),
    "timeline_events_per_design": (4, "events", C, "design.submitted, validation.started, validation.finished, results.ready (DESIGN.md §2)"),
    "log_records_per_design": (5, "records", C, "the four plus validation.requested (BENCHMARKS §1, §5)"),
    "peak_factor": (10, "x mean", A, "issue 26: peaks 10x"),
    "api_reads_per_design": (2, "requests", A, "docs/DEPLOY.md's usage: a status read and a report read per submission"),
    "full_netlist_share": (0.20, "share", A, "docs/DEPLOY.md: 20% of designs carry a 200 KB netlist by reference"),
    "idempotency_key_share": (0.5, "share", A, "submissions sending an Idempotency-Key (not measured)"),
    "webhook_deliveries_per_design": (0.5, "deliveries", A, "half the designs' tenants subscribe to results.ready (not measured)"),
    "hot_tenant_share": (0.20, "share", A, "issue 26's example: the hottest tenant sends 20% of all designs"),
    "tenants_1x": (20, "tenants", A, "docs/DEPLOY.md's seed (20 tenants)"),
    "tenants_per_10x": (4, "x tenants", A, "tenants grow 4x per 10x of volume (so 20, 80, 320, 1280)"),
    "designs_held_days": (90, "days", A, "a tenant holds its last 90 days of designs, up to --tenant-designs"),
    "tenant_designs_cap": (10_000, "designs", C, "--tenant-designs default (README configuration)"),
    # --- measured here ------------------------------------------------------------------
    "record_bytes_design_submitted": (5_887, "B", M, "BENCHMARKS §5: the platform's own records, compact netlist"),
    "record_bytes_validation_requested": (5_898, "B", M, "BENCHMARKS §5"),
    "record_bytes_validation_started": (324, "B", M, "BENCHMARKS §5"),
    "record_bytes_validation_finished": (747, "B", M, "BENCHMARKS §5"),
    "record_bytes_results_ready": (349, "B", M, "BENCHMARKS §5"),
    "record_overhead_bytes": (120, "B", A, "key, headers and Kafka batch framing per record (not measured)"),
    "submit_body_bytes": (5_999, "B", M, "--measure-logs: the compact blink design's POST body"),
    "full_netlist_bytes": (198_638, "B", M, "BENCHMARKS §1: the full yosys netlist"),
    "cpu_ms_per_design_compact": (0.754, "ms", M, "BENCHMARKS §1: 10,000 compact designs in 3.77 s on 2 cores, load generator included (2 x 3.77 s / 10,000), release"),
    "cpu_ms_per_design_full": (1.682, "ms", M, "BENCHMARKS §1: 10,000 full designs in 8.41 s on 2 cores (2 x 8.41 s / 10,000), release"),
    "log_bytes_request": (357, "B", M, "--measure-logs: 'A request was answered.' per API request, release openqq up, JSON log, 8-character tenant id"),
    "log_bytes_accepted": (362, "B", M, "--measure-logs: 'The design revision was accepted.' per submission"),
    "log_bytes_record": (405, "B", M, "--measure-logs: 'A record was handled.' per record per consumer, 3 a design"),
    "limiter_decisions_per_s_core": (53_520, "1/s", M, "BENCHMARKS §3: Redis limiter, 10,000 tenants, all admitted, one Redis core, release"),
    "limiter_hot_key_decisions_per_s": (59_099, "1/s", M, "BENCHMARKS §3: one hot tenant, one key, one Redis core, release"),
    "weighted_script_cost_ratio": (1.57, "x", C, "Redis commands on the admitted path: 11 in redis_limiter_weighted.lua against 7 in redis_limiter.lua"),
    "dynamo_read_keys_per_event": (5, "keys", C, "apply_batch's BatchGetItem: design, applied marker, feed-once, feed head, webhook count (docs/DYNAMODB.md)"),
    "tx_items_per_event": (5, "items", C, "design item, applied marker, timeline entry, feed entry, feed-once (docs/DYNAMODB.md, Writes)"),
    "tx_items_per_tenant_group": (2, "items", C, "the tenant's feed head and the webhook-count ConditionCheck, once per transaction"),
    "tx_items_report": (1, "items", C, "validation.finished also writes the report"),
    "tx_group_max_items": (100, "items", C, "DynamoDB's TransactWriteItems limit; the store closes a group there"),
    "tx_max_events_per_tenant_group": (16, "events", C, "one event is at most ~6 items here; 100 items a group"),
    "design_item_bytes": (350, "B", A, "estimated from the design item's attributes (docs/DYNAMODB.md); not measured"),
    "kept_spec_kb_compact": (6, "KB", C, "SPEC# holds the design.submitted payload: ~5.9 KB compact (BENCHMARKS §5)"),
    "kept_spec_kb_full": (1, "KB", A, "by reference the payload is its digest and small fields"),
    "keep_spec_calls_per_record": (1, "calls", C, "design-job keeps each specification with its own PutItem (BENCHMARKS §8: not yet one per batch)"),
    "usage_counter_items": (0, "items", C, "0: the quota reads usage as a Query over every design item (dynamo/reads.rs); k: a k-way counter (a mitigation)"),
    "hot_tenant_partitions": (1, "partitions", C, "records are keyed by tenant: one partition per topic (DESIGN.md §2); k: a hot tenant keyed by tenant and design bucket (a mitigation)"),
    "feed_items_per_event": (2, "items", C, "the feed entry and its feed-once item share the feed's partition key T#t#F (docs/DYNAMODB.md)"),
    "feed_shards": (1, "shards", C, "one feed, one head per tenant; k: a write-sharded feed (a mitigation)"),
    "spec_in_tenant_partition": (1, "share", C, "SPEC# items live in the tenant's partition T#t (docs/DYNAMODB.md); 0: under the design's own key (a mitigation)"),
    "read_first_share": (1.0, "share", A, "on Lambda each function has its own memory, so writes mostly read first (BENCHMARKS §8)"),
    "usage_cache_s": (5, "s", C, "the storage quota's usage is cached 5 s per tenant per process (functions/api/src/quota.rs)"),
    "rcu_per_api_read": (1.5, "RCU", C, "GET design: 2 strongly consistent GetItems; report: 1 (under 4 KB); averaged"),
    # --- template.yaml --------------------------------------------------------------------
    "mem_mb_api": (512, "MB", C, "template.yaml ApiFunction"),
    "mem_mb_design_job": (512, "MB", C, "template.yaml DesignJobFunction"),
    "mem_mb_validation": (1769, "MB", C, "template.yaml ValidationFunction (one vCPU)"),
    "mem_mb_results": (512, "MB", C, "template.yaml ResultsFunction"),
    "mb_per_vcpu": (1769, "MB", C, "Lambda gives one vCPU at 1,769 MB, CPU in proportion below (template.yaml comment)"),
    "batch_size_design_job": (100, "records", C, "template.yaml trigger"),
    "batch_size_validation": (10, "records", C, "template.yaml trigger"),
    "batch_size_results": (100, "records", C, "template.yaml trigger"),
    "batching_window_s": (1, "s", C, "template.yaml MaximumBatchingWindowInSeconds"),
    "api_reserved_concurrency": (50, "instances", C, "template.yaml ApiReservedConcurrency default"),
    "max_pollers": (2, "pollers", C, "template.yaml MaximumPollers default"),
    "invocations_per_poller": (5, "invocations", C, "template.yaml: one poller, 5 MB/s or 5 concurrent invocations"),
    "mb_per_s_per_poller": (5, "MB/s", C, "template.yaml"),
    "triggers": (12, "triggers", C, "docs/DEPLOY.md: five consumers, the batch function's two, five batch-lane twins"),
    "cache_ecpu_cap": (5_000, "ECPU/s", C, "template.yaml LimiterCache ECPUPerSecond maximum"),
    "log_retention_days": (30, "days", C, "template.yaml LogRetentionDays default"),
    "default_rate_limit": (100, "requests/s", C, "--rate-limit 100/1s"),
    "default_byte_limit_per_s": (8 * 1048576 / 10, "B/s", C, "--byte-limit 8MiB/10s"),
    "topics_interactive": (7, "topics", C, "design.submitted ... results.ready, synthesis and generation (DEPLOY.md)"),
    "topics_other": (10, "topics", C, "batch.submitted, batch.item.ended, seven twins, dead-letter (DEPLOY.md)"),
    "partitions_other": (12, "partitions", A, "the batch lane's and dead-letter topics stay at openqq up's default"),
    "replication": (3, "replicas", A, "MSK across three zones, acks=all"),
    "msk_retention_days": (7, "days", A, "as --log-retention's default"),
    # --- AWS behaviour not measured here ----------------------------------------------------
    "dynamo_rtt_ms": (5, "ms", A, "one GetItem/PutItem/UpdateItem/BatchGetItem/Query page in-region"),
    "dynamo_tx_rtt_ms": (10, "ms", A, "one TransactWriteItems in-region"),
    "msk_publish_ms": (10, "ms", A, "acks=all on three replicas; BENCHMARKS §5 measured p50 7 ms on one loopback broker (linger 5 ms)"),
    "s3_get_ms": (20, "ms", A, "GetObject of a 200 KB netlist"),
    "s3_put_ms": (40, "ms", A, "HeadObject then PutObject"),
    "s3_list_ms": (30, "ms", A, "one ListObjectsV2 page"),
    "redis_rtt_ms": (1, "ms", A, "one EVALSHA on ElastiCache in the same zone"),
    "lambda_overhead_ms": (2, "ms", A, "runtime API round trip and response per invocation"),
    "dynamo_partition_wcu": (1_000, "WCU/s", A, "DynamoDB documented per-partition (and per-item) write limit"),
    "dynamo_partition_rcu": (3_000, "RCU/s", A, "DynamoDB documented per-partition read limit"),
    "due_index_writes_per_delivery": (3, "writes", C, "queued, claimed, finished (docs/DYNAMODB.md, limits of the index)"),
    "ecpu_us": (3, "us", A, "one ECPU ~ 3 us of vCPU for scripts (AWS pricing example; AWS publishes no formula)"),
    "lambda_account_concurrency": (1_000, "instances", A, "default regional Lambda concurrency quota"),
    "target_utilisation": (0.5, "share", A, "headroom: size partitions, pollers, brokers for 50% busy at peak"),
    "provisioned_target": (0.7, "share", A, "DynamoDB provisioned capacity at 70% of peak (auto scaling's usual target)"),
    "lambda_platform_log_bytes": (350, "B", A, "START/END/REPORT lines per invocation"),
    "emf_bytes_api_request": (2_000, "B", A, "docs/DEPLOY.md's estimate of metric lines per API request"),
    "emf_bytes_consumer_invocation": (1_000, "B", A, "docs/DEPLOY.md's estimate per consumer invocation"),
    # --- prices, us-east-1 ---------------------------------------------------------------
    "price_lambda_gb_s": (0.0000133334, "$/GB-s", P, "DEPLOY.md (arm64, 2025)"),
    "price_lambda_request": (0.20e-6, "$/request", P, "DEPLOY.md"),
    "price_poller_hour": (0.185, "$/poller-h", P, "DEPLOY.md"),
    "price_http_api_request": (1.00e-6, "$/request", P, "DEPLOY.md"),
    "price_wru": (0.625e-6, "$/WRU", P, "DEPLOY.md (on demand)"),
    "price_rru": (0.125e-6, "$/RRU", P, "DEPLOY.md (on demand)"),
    "price_wcu_hour": (0.00065, "$/WCU-h", P, "AWS provisioned list price, 2025 (not in DEPLOY.md; check)"),
    "price_rcu_hour": (0.00013, "$/RCU-h", P, "AWS provisioned list price, 2025 (not in DEPLOY.md; check)"),
    "price_dynamo_gb_month": (0.45, "$/GB-month", P, "DEPLOY.md: storage 0.25 + PITR 0.20"),
    "design_store_kb": (10, "KB", A, "DEPLOY.md: ~10 KB stored per design"),
    "price_s3_put": (0.005e-3, "$/request", P, "DEPLOY.md (PUT, COPY, LIST)"),
    "price_s3_get": (0.0004e-3, "$/request", P, "DEPLOY.md (GET, HEAD)"),
    "price_s3_gb_month": (0.023, "$/GB-month", P, "DEPLOY.md"),
    "price_ecpu": (0.0023e-6, "$/ECPU", P, "DEPLOY.md (Valkey serverless)"),
    "price_cache_gb_hour": (0.0837, "$/GB-h", P, "DEPLOY.md (100 MB minimum)"),
    "price_log_gb": (0.50, "$/GB ingested", P, "DEPLOY.md"),
    "price_log_gb_month": (0.03, "$/GB-month", P, "CloudWatch Logs storage list price, 2025 (not in DEPLOY.md; check)"),
    "price_metric_month": (0.30, "$/metric-month", P, "DEPLOY.md"),
    "price_msk_gb_month": (0.10, "$/GB-month", P, "MSK storage list price, 2025 (not in DEPLOY.md; check)"),
    "fixed_month": (23.60, "$/month", P, "DEPLOY.md: scheduler 16.20, alarms and dashboard 7.00, secret 0.40"),
}

# MSK Standard brokers: recommended partition replicas per broker (AWS's best-practice table),
# an assumed sustained ingress a broker takes (not measured; with replication counted), and an
# assumed list price per broker-hour (2025; t3.small's from DEPLOY.md). Check before relying.
BROKERS = [
    ("kafka.t3.small", 300, 5, 0.0456),
    ("kafka.m7g.large", 1000, 30, 0.204),
    ("kafka.m7g.xlarge", 1000, 60, 0.408),
    ("kafka.m7g.2xlarge", 2000, 120, 0.816),
    ("kafka.m7g.4xlarge", 4000, 240, 1.632),
]
PARTITION_STEPS = [12, 24, 48, 96, 192, 384, 768]
SCALES = [1, 10, 100, 1000]
HOURS_PER_MONTH = 730
DAYS_PER_MONTH = 30


def values(overrides=None):
    v = {k: spec[0] for k, spec in INPUTS.items()}
    for k, x in (overrides or {}).items():
        if k not in v:
            raise SystemExit(f"unknown input {k!r}; see --inputs")
        v[k] = float(x)
    return v


def batch_fill(rate, size, window):
    """Records in a batch from a partition receiving `rate` records/s: the batch goes when full
    or when the window has passed (the trigger's rule), at least one record."""
    return max(1.0, min(float(size), rate * window))


def durations(v, n):
    """Milliseconds one invocation takes for a batch of n records, per consumer function: the
    round trips it waits for plus its CPU (the measured whole-pipeline CPU per design charged to
    each function, an upper bound, stretched by the memory's share of a vCPU)."""
    cpu = (1 - v["full_netlist_share"]) * v["cpu_ms_per_design_compact"] + v["full_netlist_share"] * v["cpu_ms_per_design_full"]
    slow = lambda mem: max(1.0, v["mb_per_vcpu"] / mem)
    read = lambda events: v["read_first_share"] * math.ceil(events * v["dynamo_read_keys_per_event"] / 100) * v["dynamo_rtt_ms"]
    items = lambda events, extra: events * (v["tx_items_per_event"] + extra) + v["tx_items_per_tenant_group"]
    tx = lambda events, extra: math.ceil(items(events, extra) / v["tx_group_max_items"]) * v["dynamo_tx_rtt_ms"]
    base = v["lambda_overhead_ms"]
    return {
        # apply_batch, then keep_spec for each record in turn, then one publish.
        "design-job": base + read(n) + tx(n, 0) + max(1, n * v["keep_spec_calls_per_record"]) * v["dynamo_rtt_ms"] + v["msk_publish_ms"] + n * cpu * slow(v["mem_mb_design_job"]),
        # started writes, objects read, validator, finished writes, two topics published.
        "validation": base + read(n) + tx(n, 0) + n * v["full_netlist_share"] * v["s3_get_ms"] + read(n) + tx(n, v["tx_items_report"])
        + 2 * v["msk_publish_ms"] + n * cpu * slow(v["mem_mb_validation"]),
        "results": base + read(n) + tx(n, 0) + v["msk_publish_ms"] + n * cpu * slow(v["mem_mb_results"]),
    }


def api_durations(v, usage_fraction, usage_pages):
    cpu = (1 - v["full_netlist_share"]) * v["cpu_ms_per_design_compact"] + v["full_netlist_share"] * v["cpu_ms_per_design_full"]
    cpu *= max(1.0, v["mb_per_vcpu"] / v["mem_mb_api"])
    submit = (
        v["lambda_overhead_ms"] + 2 * v["redis_rtt_ms"]
        + usage_fraction * (usage_pages * v["dynamo_rtt_ms"] + (0 if v["usage_counter_items"] else 2 * v["s3_list_ms"]))
        + v["dynamo_rtt_ms"]  # the log-bytes charge
        + v["full_netlist_share"] * v["s3_put_ms"] + v["msk_publish_ms"]
        + v["dynamo_rtt_ms"]  # the accepted marker
        + v["idempotency_key_share"] * 2 * v["dynamo_rtt_ms"] + cpu
    )
    read = v["lambda_overhead_ms"] + v["redis_rtt_ms"] + 2 * v["dynamo_rtt_ms"] + 0.2 * cpu
    return submit, read


def scale(v, s):
    out = {"scale": s}
    tenants = v["tenants_1x"] * v["tenants_per_10x"] ** math.log10(s)
    designs_day = v["seed_events_per_day"] * s / v["timeline_events_per_design"]
    mean = designs_day / 86_400
    peak = mean * v["peak_factor"]
    hot = v["hot_tenant_share"]
    out.update(tenants=tenants, designs_per_day=designs_day, designs_s_mean=mean, designs_s_peak=peak,
               events_s_mean=mean * v["timeline_events_per_design"], events_s_peak=peak * v["timeline_events_per_design"])
    requests_per_design = 1 + v["api_reads_per_design"]

    # --- the event log: bytes and partitions ------------------------------------------------
    record_bytes = sum(v[k] for k in INPUTS if k.startswith("record_bytes_")) + v["log_records_per_design"] * v["record_overhead_bytes"]
    ingress_peak = peak * record_bytes  # B/s produced
    out["msk_mb_s_peak"] = ingress_peak / 1e6

    # Each consumer sees one record per design. Pick the smallest partition count whose ordinary
    # partitions stay under the target; the hot tenant's partition is what it is whatever the count.
    sizes = {"design-job": v["batch_size_design_job"], "validation": v["batch_size_validation"], "results": v["batch_size_results"]}
    mems = {"design-job": v["mem_mb_design_job"], "validation": v["mem_mb_validation"], "results": v["mem_mb_results"]}

    def partition_load(rate, fn):
        n = batch_fill(rate, sizes[fn], v["batching_window_s"])
        d = durations(v, n)[fn] / 1000
        return rate / n * d, n, d  # busy share, batch, seconds per invocation

    chosen = PARTITION_STEPS[-1]
    for p in PARTITION_STEPS:
        if all(partition_load(peak * (1 - hot) / p, fn)[0] <= v["target_utilisation"] for fn in sizes):
            chosen = p
            break
    out["partitions"] = chosen
    functions = {}
    for fn in sizes:
        ordinary_rate_peak = peak * (1 - hot) / chosen
        hot_rate_peak = peak * hot / v["hot_tenant_partitions"] + ordinary_rate_peak
        u_ord, n_ord, d_ord = partition_load(ordinary_rate_peak, fn)
        u_hot, n_hot, d_hot = partition_load(hot_rate_peak, fn)
        conc_peak = (chosen - 1) * min(u_ord, 1) + min(u_hot, 1)
        # Monthly duration at the mean rate (batches fill less at the mean).
        mean_rate = mean / chosen
        n_mean = batch_fill(mean_rate, sizes[fn], v["batching_window_s"])
        inv_s_mean = mean / n_mean
        d_mean = durations(v, n_mean)[fn] / 1000
        functions[fn] = {
            "batch_peak": n_ord, "batch_hot": n_hot, "duration_ms_peak": d_ord * 1000, "duration_ms_hot": d_hot * 1000,
            "invocations_s_peak": peak * (1 - hot) / n_ord + peak * hot / n_hot, "concurrency_peak": conc_peak,
            "hot_partition_busy": u_hot, "hot_partition_max_designs_s": sizes[fn] / durations(v, sizes[fn])[fn] * 1000,
            "invocations_month": inv_s_mean * 86_400 * DAYS_PER_MONTH,
            "gb_s_month": inv_s_mean * 86_400 * DAYS_PER_MONTH * d_mean * mems[fn] / 1024,
            "pollers": max(1, math.ceil(conc_peak / v["invocations_per_poller"]), math.ceil(ingress_peak / 5 / 1e6 / v["mb_per_s_per_poller"])),
        }

    # --- the API -----------------------------------------------------------------------------
    submits_peak = peak
    held_hot = min(v["tenant_designs_cap"], designs_day * hot * v["designs_held_days"])
    held_avg = min(v["tenant_designs_cap"], designs_day * (1 - hot) / max(1, tenants - 1) * v["designs_held_days"])
    pages = lambda held: 1 if v["usage_counter_items"] else max(1, math.ceil(held * v["design_item_bytes"] / 1_048_576))
    # First guess of the API's instances, then the usage reads they make (each instance reads a
    # tenant's usage at most once per cache period), then the durations again.
    submit_ms, read_ms = api_durations(v, 1.0, pages(held_avg))
    api_rps_peak = peak * requests_per_design
    instances = max(1, math.ceil((peak * submit_ms + peak * v["api_reads_per_design"] * read_ms) / 1000))
    per_instance = instances / v["usage_cache_s"]
    hot_usage_s = min(peak * hot, per_instance)
    other_rate = peak * (1 - hot) / max(1, tenants - 1)
    other_usage_s = max(1, tenants - 1) * min(other_rate, per_instance)
    usage_fraction = (hot_usage_s + other_usage_s) / peak
    submit_ms, read_ms = api_durations(v, usage_fraction, pages(held_avg))
    api_conc = (peak * submit_ms + peak * v["api_reads_per_design"] * read_ms) / 1000
    api_gb_s_month = mean * DAYS_PER_MONTH * 86_400 * (submit_ms + v["api_reads_per_design"] * read_ms) / 1000 * v["mem_mb_api"] / 1024
    functions["api"] = {
        "requests_s_peak": api_rps_peak, "duration_ms_submit": submit_ms, "duration_ms_read": read_ms,
        "concurrency_peak": api_conc, "invocations_month": mean * requests_per_design * 86_400 * DAYS_PER_MONTH,
        "gb_s_month": api_gb_s_month, "usage_reads_share": usage_fraction,
    }
    out["functions"] = functions
    out["lambda_concurrency_peak"] = sum(f["concurrency_peak"] for f in functions.values())

    # --- DynamoDB ----------------------------------------------------------------------------
    events = v["timeline_events_per_design"]
    tx_items = events * v["tx_items_per_event"] + v["tx_items_report"] + events * v["tx_items_per_tenant_group"]
    spec_kb = (1 - v["full_netlist_share"]) * v["kept_spec_kb_compact"] + v["full_netlist_share"] * v["kept_spec_kb_full"]
    deliveries = v["webhook_deliveries_per_design"]
    wcu_design = (
        2 * tx_items  # transactional writes of items under 1 KB
        + 1 + 1  # accepted marker, log-bytes charge
        + spec_kb  # kept specification
        + v["idempotency_key_share"] * 2
        + deliveries * (2 + 2 + v["due_index_writes_per_delivery"])  # put in the feed's transaction, claim, finish; index writes
    )
    # Eventually consistent: half a unit per 4 KB of the items read (a Query counts whole items,
    # whatever it projects); a k-way counter is k small items.
    usage_rcu = lambda held: 0.5 * (v["usage_counter_items"] or math.ceil(held * v["design_item_bytes"] / 4096))
    rcu_design = (
        events * v["dynamo_read_keys_per_event"] * v["read_first_share"]
        + v["api_reads_per_design"] * v["rcu_per_api_read"]
        + (hot * (hot_usage_s / max(peak * hot, 1e-12)) * usage_rcu(held_hot)
           + (1 - hot) * (other_usage_s / max(peak * (1 - hot), 1e-12)) * usage_rcu(held_avg))
    )
    usage_rcu_design = rcu_design - events * v["dynamo_read_keys_per_event"] * v["read_first_share"] - v["api_reads_per_design"] * v["rcu_per_api_read"]
    out["dynamo"] = {
        "wcu_per_design": wcu_design, "rcu_per_design": rcu_design,
        "wcu_design_transactions": 2 * tx_items, "wcu_design_kept_spec": spec_kb,
        "wcu_design_webhooks": deliveries * (2 + 2 + v["due_index_writes_per_delivery"]),
        "rcu_design_consumers": events * v["dynamo_read_keys_per_event"] * v["read_first_share"],
        "rcu_design_usage": usage_rcu_design,
        # Provisioned capacity pays once its mean use passes this share of what is provisioned.
        "provisioned_break_even_use": v["price_wcu_hour"] / (3600 * v["price_wru"]),
        "provisioned_mean_use": v["provisioned_target"] / v["peak_factor"],
        "wcu_s_peak": peak * wcu_design, "rcu_s_peak": peak * rcu_design,
        "wru_month": mean * 86_400 * DAYS_PER_MONTH * wcu_design, "rru_month": mean * 86_400 * DAYS_PER_MONTH * rcu_design,
        "provisioned_wcu": peak * wcu_design / v["provisioned_target"], "provisioned_rcu": peak * rcu_design / v["provisioned_target"],
    }

    # --- hot keys ------------------------------------------------------------------------------
    hot_events_s = peak * hot * events
    n_hot = {fn: functions[fn]["batch_hot"] for fn in sizes}
    per_group = lambda fn: min(n_hot[fn], v["tx_max_events_per_tenant_group"])
    head_tx_s = peak * hot * (1 / per_group("design-job") + 2 / per_group("validation") + 1 / per_group("results")) / v["feed_shards"]
    feed_wcu = (2 * (v["feed_items_per_event"] * hot_events_s) + peak * hot * deliveries * 2) / v["feed_shards"] + 2 * head_tx_s
    # T#t holds the design items (one transactional update per event), accepted markers, budgets,
    # kept specifications and idempotency keys.
    tenant_wcu = peak * hot * (2 * events + 1 + 1 + spec_kb * v["spec_in_tenant_partition"] + v["idempotency_key_share"] * 2)
    hot_usage_rcu = hot_usage_s * usage_rcu(held_hot)
    out["hot"] = {
        "designs_s_peak": peak * hot,
        "feed_head_wcu_s": 2 * head_tx_s, "feed_partition_wcu_s": feed_wcu,
        "tenant_partition_wcu_s": tenant_wcu, "usage_rcu_s": hot_usage_rcu, "designs_held": held_hot,
        "log_budget_item_wcu_s": peak * hot,
        "requests_s": api_rps_peak * hot, "body_bytes_s": peak * hot * v["submit_body_bytes"],
        "limiter_key_decisions_s": api_rps_peak * hot + peak * hot,
    }

    # --- Redis ---------------------------------------------------------------------------------
    ecpu_decision = 1e6 / v["limiter_decisions_per_s_core"] / v["ecpu_us"]
    decisions_peak = api_rps_peak + peak  # every request, plus the byte limit on each POST
    ecpu_peak = (api_rps_peak + peak * v["weighted_script_cost_ratio"]) * ecpu_decision
    out["redis"] = {"decisions_s_peak": decisions_peak, "ecpu_per_decision": ecpu_decision, "ecpu_s_peak": ecpu_peak,
                    "ecpu_month": ecpu_peak / v["peak_factor"] * 86_400 * DAYS_PER_MONTH}

    # --- S3 ---------------------------------------------------------------------------------------
    usage_s_mean = usage_fraction * mean  # same share at the mean, an upper bound there
    fulls = mean * v["full_netlist_share"]
    out["s3"] = {
        "put_s_peak": peak * v["full_netlist_share"], "get_s_peak": peak * v["full_netlist_share"] * 2,
        "list_s_peak": 0 if v["usage_counter_items"] else usage_fraction * peak * 2,
        "put_month": (fulls + (0 if v["usage_counter_items"] else usage_s_mean * 2)) * 86_400 * DAYS_PER_MONTH,  # PutObject + ListObjectsV2
        "get_month": fulls * 2 * 86_400 * DAYS_PER_MONTH,  # HeadObject on put, GetObject in validation
        "gb_added_month": designs_day * DAYS_PER_MONTH * v["full_netlist_share"] * v["full_netlist_bytes"] / 1e9,
    }

    # --- logs ---------------------------------------------------------------------------------------
    consumer_invocations_month = sum(functions[fn]["invocations_month"] for fn in sizes)
    designs_month = designs_day * DAYS_PER_MONTH
    log_bytes_month = (
        designs_month * (v["log_bytes_accepted"] + requests_per_design * v["log_bytes_request"] + 3 * v["log_bytes_record"])
        + (functions["api"]["invocations_month"] + consumer_invocations_month) * v["lambda_platform_log_bytes"]
        + functions["api"]["invocations_month"] * v["emf_bytes_api_request"]
        + consumer_invocations_month * v["emf_bytes_consumer_invocation"]
    )
    out["logs"] = {"gb_day": log_bytes_month / DAYS_PER_MONTH / 1e9, "gb_month": log_bytes_month / 1e9,
                   "gb_stored": log_bytes_month / 1e9 * v["log_retention_days"] / DAYS_PER_MONTH,
                   "bytes_per_design": log_bytes_month / designs_month}

    # --- MSK brokers ----------------------------------------------------------------------------------
    replicas = (v["topics_interactive"] * chosen + v["topics_other"] * v["partitions_other"]) * v["replication"]
    replicated_mb_s = ingress_peak * v["replication"] / 1e6
    # The fewest brokers (three zones: multiples of 3) that hold the partitions and the traffic
    # with headroom, on the cheapest type that does.
    best = None
    for brokers in range(3, 61, 3):
        fits = [(name, price) for name, max_parts, mb_s, price in BROKERS
                if replicas / brokers <= max_parts and replicated_mb_s / brokers <= mb_s * v["target_utilisation"]]
        if fits:
            name, price = min(fits, key=lambda f: f[1])
            best = (name, brokers, replicas / brokers, brokers * price * HOURS_PER_MONTH)
            break
    msk_gb = ingress_peak / v["peak_factor"] * 86_400 * v["msk_retention_days"] * v["replication"] / 1e9
    out["msk"] = {"partition_replicas": replicas, "broker": best[0], "brokers": best[1], "replicas_per_broker": best[2],
                  "replicated_mb_s_peak": replicated_mb_s, "storage_gb": msk_gb,
                  "month": best[3] + msk_gb * v["price_msk_gb_month"]}

    # --- ElastiCache --------------------------------------------------------------------------------
    cache_gb = 0.1  # the serverless minimum; a tenant's windows are a few KB

    # --- cost ------------------------------------------------------------------------------------------
    gb_s = sum(f["gb_s_month"] for f in functions.values())
    invocations = sum(f["invocations_month"] for f in functions.values())
    pollers = sum(functions[fn]["pollers"] for fn in sizes) + (v["triggers"] - len(sizes))
    stored_gb = designs_month * v["design_store_kb"] / 1e6
    metrics = 60 + 7 * min(tenants, 100)
    cost = {
        "lambda": gb_s * v["price_lambda_gb_s"] + invocations * v["price_lambda_request"],
        "event_pollers": pollers * HOURS_PER_MONTH * v["price_poller_hour"],
        "http_api": functions["api"]["invocations_month"] * v["price_http_api_request"],
        "dynamodb_on_demand": out["dynamo"]["wru_month"] * v["price_wru"] + out["dynamo"]["rru_month"] * v["price_rru"] + stored_gb * v["price_dynamo_gb_month"],
        "s3": out["s3"]["put_month"] * v["price_s3_put"] + out["s3"]["get_month"] * v["price_s3_get"] + out["s3"]["gb_added_month"] * v["price_s3_gb_month"],
        "elasticache": cache_gb * HOURS_PER_MONTH * v["price_cache_gb_hour"] + out["redis"]["ecpu_month"] * v["price_ecpu"],
        "cloudwatch_logs": out["logs"]["gb_month"] * v["price_log_gb"] + out["logs"]["gb_stored"] * v["price_log_gb_month"],
        "cloudwatch_metrics": metrics * v["price_metric_month"],
        "msk": out["msk"]["month"],
        "fixed": v["fixed_month"],
    }
    provisioned = (out["dynamo"]["provisioned_wcu"] * v["price_wcu_hour"] + out["dynamo"]["provisioned_rcu"] * v["price_rcu_hour"]) * HOURS_PER_MONTH + stored_gb * v["price_dynamo_gb_month"]
    out["dynamo"]["provisioned_month"] = provisioned
    out["pollers"] = pollers
    out["cost"] = cost
    out["cost_month"] = sum(cost.values())
    events_month = designs_month * events
    out["events_month"] = events_month
    out["cost_per_million_events"] = out["cost_month"] / (events_month / 1e6)
    out["cost_per_million_events_without_pollers_and_msk"] = (out["cost_month"] - cost["event_pollers"] - cost["msk"]) / (events_month / 1e6)

    # --- what binds first: demand over capacity at the peak ---------------------------------------------
    checks = {name: (load, kind) for name, load, kind in [
        ("hot tenant's validation partition (batch 10)", functions["validation"]["hot_partition_busy"], "key"),
        ("hot tenant's design-job partition", functions["design-job"]["hot_partition_busy"], "key"),
        ("hot tenant's results partition", functions["results"]["hot_partition_busy"], "key"),
        ("hot tenant's feed head item (1,000 WCU/s)", out["hot"]["feed_head_wcu_s"] / v["dynamo_partition_wcu"], "key"),
        ("hot tenant's feed partition T#t#F (1,000 WCU/s)", feed_wcu / v["dynamo_partition_wcu"], "key"),
        ("hot tenant's partition T#t, writes (1,000 WCU/s)", tenant_wcu / v["dynamo_partition_wcu"], "key"),
        ("hot tenant's usage reads on T#t (3,000 RCU/s)", hot_usage_rcu / v["dynamo_partition_rcu"], "key"),
        ("hot tenant's log-bytes budget item (1,000 WCU/s)", out["hot"]["log_budget_item_wcu_s"] / v["dynamo_partition_wcu"], "key"),
        ("webhook due index, one partition (1,000 WCU/s)", peak * deliveries * v["due_index_writes_per_delivery"] / v["dynamo_partition_wcu"], "key"),
        ("hot tenant's limiter key (one Redis core)", out["hot"]["limiter_key_decisions_s"] / v["limiter_hot_key_decisions_per_s"], "key"),
        ("hot tenant's requests vs --rate-limit 100/1s", out["hot"]["requests_s"] / v["default_rate_limit"], "setting"),
        ("hot tenant's bodies vs --byte-limit 8MiB/10s", out["hot"]["body_bytes_s"] / v["default_byte_limit_per_s"], "setting"),
        ("cache ECPU/s vs the template's 5,000", ecpu_peak / v["cache_ecpu_cap"], "setting"),
        ("API concurrency vs ApiReservedConcurrency 50", api_conc / v["api_reserved_concurrency"], "setting"),
        ("pollers per trigger vs MaximumPollers 2", max(functions[fn]["concurrency_peak"] for fn in sizes) / (v["max_pollers"] * v["invocations_per_poller"]), "setting"),
        ("Lambda concurrency vs the account's 1,000", out["lambda_concurrency_peak"] / v["lambda_account_concurrency"], "setting"),
    ]}
    out["checks"] = {name: load for name, (load, _) in checks.items()}
    out["check_kinds"] = {name: kind for name, (_, kind) in checks.items()}
    ranked = sorted(out["checks"].items(), key=lambda kv: -kv[1])
    out["most_loaded"] = ranked[0][0]
    out["most_loaded_load"] = ranked[0][1]
    return out


def crossings(v):
    """For each limit, the multiple of the seed's volume at which its load at peak reaches 1.0
    (None past 10,000x): a grid of 40 steps a decade, then linear between the two steps."""
    grid = [10 ** (k / 40) for k in range(0, 161)]
    loads = [scale(v, s)["checks"] for s in grid]
    out = {}
    for name in loads[0]:
        out[name] = None
        for i, s in enumerate(grid):
            if loads[i][name] >= 1.0:
                if i == 0:
                    out[name] = s
                else:
                    a, b = loads[i - 1][name], loads[i][name]
                    f = (1.0 - a) / (b - a) if b > a else 1.0
                    out[name] = grid[i - 1] * (s / grid[i - 1]) ** f
                break
    return out


def model(overrides=None, with_crossings=True):
    v = values(overrides)
    m = {"inputs": v, "scales": [scale(v, s) for s in SCALES]}
    if with_crossings:
        kinds = m["scales"][0]["check_kinds"]
        cross = crossings(v)
        m["crossings"] = {name: {"at_scale": x, "kind": kinds[name]} for name, x in cross.items()}
        for kind in ["key", "setting"]:
            found = sorted((x, n) for n, x in cross.items() if x is not None and kinds[n] == kind)
            m[f"first_{kind}_limit"] = {"name": found[0][1], "at_scale": found[0][0]} if found else None
    return m


# --- printing -------------------------------------------------------------------------------------

def fmt(x):
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def table(title, rows, results):
    head = ["", *[f"{r['scale']}x" for r in results]]
    body = [[label, *[fmt(get(r)) for r in results]] for label, get in rows]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    line = lambda row: "| " + " | ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)) + " |"
    print(f"\n{title}\n")
    print(line(head))
    print("|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|")
    for row in body:
        print(line(row))


def show(m):
    rs = m["scales"]
    f = lambda fn, k: (lambda r: r["functions"][fn][k])
    table("Volume", [
        ("designs/day", lambda r: r["designs_per_day"]),
        ("designs/s, mean", lambda r: r["designs_s_mean"]),
        ("designs/s, peak", lambda r: r["designs_s_peak"]),
        ("events/s, mean", lambda r: r["events_s_mean"]),
        ("events/s, peak", lambda r: r["events_s_peak"]),
        ("tenants (assumed)", lambda r: r["tenants"]),
        ("hot tenant designs/s, peak", lambda r: r["hot"]["designs_s_peak"]),
    ], rs)
    table("Event log (MSK)", [
        ("produced MB/s, peak", lambda r: r["msk_mb_s_peak"]),
        ("replicated MB/s, peak", lambda r: r["msk"]["replicated_mb_s_peak"]),
        ("partitions per interactive topic", lambda r: r["partitions"]),
        ("partition replicas, all topics", lambda r: r["msk"]["partition_replicas"]),
        ("broker", lambda r: r["msk"]["broker"]),
        ("brokers", lambda r: r["msk"]["brokers"]),
        ("retained GB (7 days, x3)", lambda r: r["msk"]["storage_gb"]),
    ], rs)
    rows = []
    for fn in ["design-job", "validation", "results"]:
        rows += [
            (f"{fn}: batch at peak", f(fn, "batch_peak")),
            (f"{fn}: ms per invocation, peak", f(fn, "duration_ms_peak")),
            (f"{fn}: invocations/s, peak", f(fn, "invocations_s_peak")),
            (f"{fn}: concurrency, peak", f(fn, "concurrency_peak")),
            (f"{fn}: most designs/s one partition takes", f(fn, "hot_partition_max_designs_s")),
            (f"{fn}: pollers", f(fn, "pollers")),
            (f"{fn}: GB-s/month", f(fn, "gb_s_month")),
        ]
    rows += [
        ("api: requests/s, peak", f("api", "requests_s_peak")),
        ("api: ms per submit", f("api", "duration_ms_submit")),
        ("api: concurrency, peak", f("api", "concurrency_peak")),
        ("api: GB-s/month", f("api", "gb_s_month")),
        ("all functions: concurrency, peak", lambda r: r["lambda_concurrency_peak"]),
    ]
    table("Lambda", rows, rs)
    table("DynamoDB", [
        ("WCU per design", lambda r: r["dynamo"]["wcu_per_design"]),
        ("  of which the consumers' transactions", lambda r: r["dynamo"]["wcu_design_transactions"]),
        ("  of which the kept specification", lambda r: r["dynamo"]["wcu_design_kept_spec"]),
        ("  of which webhook deliveries", lambda r: r["dynamo"]["wcu_design_webhooks"]),
        ("RCU per design", lambda r: r["dynamo"]["rcu_per_design"]),
        ("  of which the consumers' reads", lambda r: r["dynamo"]["rcu_design_consumers"]),
        ("  of which the storage quota's usage reads", lambda r: r["dynamo"]["rcu_design_usage"]),
        ("WCU/s, peak", lambda r: r["dynamo"]["wcu_s_peak"]),
        ("RCU/s, peak", lambda r: r["dynamo"]["rcu_s_peak"]),
        ("on demand WRU/month (M)", lambda r: r["dynamo"]["wru_month"] / 1e6),
        ("on demand RRU/month (M)", lambda r: r["dynamo"]["rru_month"] / 1e6),
        ("provisioned WCU (peak / 0.7)", lambda r: r["dynamo"]["provisioned_wcu"]),
        ("provisioned RCU (peak / 0.7)", lambda r: r["dynamo"]["provisioned_rcu"]),
        ("provisioned: mean use of what is provisioned", lambda r: r["dynamo"]["provisioned_mean_use"]),
        ("provisioned pays above this mean use", lambda r: r["dynamo"]["provisioned_break_even_use"]),
        ("provisioned $/month", lambda r: r["dynamo"]["provisioned_month"]),
        ("on demand $/month", lambda r: r["cost"]["dynamodb_on_demand"]),
    ], rs)
    table("Hot tenant's keys at peak", [
        ("feed head item WCU/s", lambda r: r["hot"]["feed_head_wcu_s"]),
        ("feed partition WCU/s", lambda r: r["hot"]["feed_partition_wcu_s"]),
        ("tenant partition WCU/s", lambda r: r["hot"]["tenant_partition_wcu_s"]),
        ("designs held", lambda r: r["hot"]["designs_held"]),
        ("usage reads RCU/s", lambda r: r["hot"]["usage_rcu_s"]),
        ("limiter key decisions/s", lambda r: r["hot"]["limiter_key_decisions_s"]),
        ("API requests/s", lambda r: r["hot"]["requests_s"]),
    ], rs)
    table("Redis, S3, logs", [
        ("limiter decisions/s, peak", lambda r: r["redis"]["decisions_s_peak"]),
        ("ECPU per decision", lambda r: r["redis"]["ecpu_per_decision"]),
        ("ECPU/s, peak", lambda r: r["redis"]["ecpu_s_peak"]),
        ("S3 PUT/s, peak", lambda r: r["s3"]["put_s_peak"]),
        ("S3 GET+HEAD/s, peak", lambda r: r["s3"]["get_s_peak"]),
        ("S3 LIST/s, peak", lambda r: r["s3"]["list_s_peak"]),
        ("S3 GB added/month", lambda r: r["s3"]["gb_added_month"]),
        ("log bytes per design", lambda r: r["logs"]["bytes_per_design"]),
        ("log GB/day", lambda r: r["logs"]["gb_day"]),
        ("log GB kept (30 days)", lambda r: r["logs"]["gb_stored"]),
    ], rs)
    table("Monthly cost, $ (30 days at the mean rate)", [
        *[(k.replace("_", " "), (lambda k: lambda r: r["cost"][k])(k)) for k in rs[0]["cost"]],
        ("total", lambda r: r["cost_month"]),
        ("per million events", lambda r: r["cost_per_million_events"]),
        ("per million events, without pollers and MSK", lambda r: r["cost_per_million_events_without_pollers_and_msk"]),
    ], rs)
    table("Load at peak against each limit (1.0 = at the limit)", [
        (name, (lambda name: lambda r: r["checks"][name])(name)) for name in rs[0]["checks"]
    ], rs)
    print("\nWhere each limit is reached (multiple of the seed's volume, load at peak = 1.0):\n")
    order = sorted(m["crossings"].items(), key=lambda kv: (kv[1]["at_scale"] is None, kv[1]["at_scale"] or 0))
    for name, c in order:
        at = "beyond 10,000x" if c["at_scale"] is None else f"{c['at_scale']:,.0f}x"
        print(f"  {at:>15}  {name} [{'a per-key or per-partition limit' if c['kind'] == 'key' else 'a setting'}]")


def show_inputs():
    print("| input | value | kind | source |")
    print("|---|---|---|---|")
    for k, (value, unit, kind, source) in INPUTS.items():
        shown = f"{value:,}" if isinstance(value, int) else (f"{value:,.0f}" if value >= 1000 else f"{value:g}")
        print(f"| `{k}` | {shown} {unit} | {kind} | {source} |")


# --- measuring the log inputs -------------------------------------------------------------------

def measure_logs(binary, designs):
    """Runs `openqq up` (the given binary) on a fresh data dir, submits `designs` compact blink
    designs from one tenant, waits until results has applied them all, and prints the bytes its
    JSON log file gained per design, by message: the inputs log_bytes_*."""
    import os, re, shutil, signal, subprocess, tempfile, threading, time, urllib.request
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared", "fpga", "fixtures", "bad")
    net = json.load(open(os.path.join(root, "netlists", "blink.json")))
    # The compact form of BENCHMARKS §1: the netlist without yosys's blackbox cell library.
    net["modules"] = {k: m for k, m in net["modules"].items() if not str(m.get("attributes", {}).get("blackbox", "0")).strip("0")}
    body = json.dumps({"name": "blink", "target": {"device": "hx8k", "package": "ct256"}, "netlist": net,
                       "constraints": {"format": "pcf", "text": open(os.path.join(root, "cases", "good_blink.pcf")).read()}}).encode()
    data = tempfile.mkdtemp(prefix="openqq-capacity-")
    up = subprocess.Popen([binary, "up", "--data-dir", data, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                           "--log-format", "json", "--rate-limit", "1000000/1s", "--byte-limit", "1GiB/10s"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        api = metrics = None
        deadline = time.time() + 60
        while api is None and time.time() < deadline:
            found = re.search(r"is up at (http://[\d.:]+).*metrics at (http://[\d.:]+)", up.stdout.readline())
            if found:
                api, metrics = found.groups()
        if api is None:
            raise SystemExit("openqq up did not say where it listens within 60 s")
        threading.Thread(target=lambda: [None for _ in up.stdout], daemon=True).start()
        token = subprocess.run([binary, "token", "--tenant", "capacity", "--data-dir", data], capture_output=True, text=True, check=True).stdout.strip()
        log = os.path.join(data, "logs", "openqq.jsonl")
        time.sleep(1)
        start = os.path.getsize(log)
        for _ in range(designs):
            request = urllib.request.Request(api + "/v1/designs", data=body, headers={"authorization": "Bearer " + token, "content-type": "application/json"})
            urllib.request.urlopen(request).read()

        def applied():
            text = urllib.request.urlopen(metrics + "/metrics").read().decode()
            return sum(float(line.split()[-1]) for line in text.splitlines()
                       if line.startswith("openqq_events_total") and 'function="results"' in line and 'outcome="applied"' in line)
        deadline = time.time() + 120
        while applied() < designs and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(1)
        with open(log, "rb") as f:
            f.seek(start)
            lines = f.read().splitlines()
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
    by_message = {}
    for line in lines:
        message = json.loads(line).get("message", "")
        count, size = by_message.get(message, (0, 0))
        by_message[message] = (count + 1, size + len(line) + 1)
    print(json.dumps({"designs": designs, "body_bytes": len(body), "log_bytes_per_design": sum(b for _, b in by_message.values()) / designs,
                      "by_message": {m: {"lines": c, "bytes_per_line": round(b / c)} for m, (c, b) in by_message.items()}}, indent=2))
    return 0


# --- self-check ----------------------------------------------------------------------------------

def check():
    """The model's internal consistency: no fixed outputs, only relations that must hold."""
    m = model()
    rs = m["scales"]
    problems = []

    def expect(ok, what):
        if not ok:
            problems.append(what)

    for a, b in zip(rs, rs[1:]):
        for key in ["designs_s_peak", "cost_month", "lambda_concurrency_peak", "msk_mb_s_peak"]:
            expect(b[key] > a[key], f"{key} grows from {a['scale']}x to {b['scale']}x")
        for key in ["wcu_s_peak", "rcu_s_peak", "wru_month", "provisioned_wcu"]:
            expect(b["dynamo"][key] > a["dynamo"][key], f"dynamo {key} grows with volume")
        expect(b["partitions"] >= a["partitions"], "partitions never shrink as volume grows")
        expect(b["cost_per_million_events"] <= a["cost_per_million_events"] * 1.0001, "cost per event does not rise with volume (fixed costs spread)")
        for name in a["checks"]:
            expect(b["checks"][name] >= a["checks"][name] - 1e-9, f"load on '{name}' never falls as volume grows")
    for r in rs:
        expect(abs(r["events_s_peak"] - r["designs_s_peak"] * m["inputs"]["timeline_events_per_design"]) < 1e-9, "events = designs x events per design")
        expect(abs(r["designs_s_peak"] / r["designs_s_mean"] - m["inputs"]["peak_factor"]) < 1e-9, "peak = mean x peak factor")
        expect(abs(sum(r["cost"].values()) - r["cost_month"]) < 1e-6, "the total is the sum of its items")
        expect(r["dynamo"]["provisioned_wcu"] >= r["dynamo"]["wcu_s_peak"], "provisioned capacity covers the peak")
        expect(r["msk"]["replicas_per_broker"] <= dict((b[0], b[1]) for b in BROKERS)[r["msk"]["broker"]], "brokers hold their recommended partitions")
        for fn in ["design-job", "validation", "results"]:
            fr = r["functions"][fn]
            expect(1 <= fr["batch_peak"] <= fr["batch_hot"], f"{fn}: the hot partition's batches are at least as full")
            expect(fr["concurrency_peak"] <= r["partitions"], f"{fn}: no more concurrent batches than partitions")
        expect(r["most_loaded_load"] == max(r["checks"].values()), "the most loaded limit is named")
    for name, c in m["crossings"].items():
        if c["at_scale"] is not None:
            at = scale(m["inputs"], c["at_scale"] * 1.05)["checks"][name]
            expect(at >= 0.95, f"'{name}' is at its limit where the model says it is reached")
    # Costs per unit: doubling a price doubles its item and nothing else.
    base = model(with_crossings=False)["scales"][1]
    twice = model({"price_wru": INPUTS["price_wru"][0] * 2}, with_crossings=False)["scales"][1]
    expect(twice["cost_month"] > base["cost_month"], "a higher price costs more")
    expect(abs(twice["cost"]["lambda"] - base["cost"]["lambda"]) < 1e-9, "a DynamoDB price leaves Lambda's cost alone")
    # A slower store makes every invocation longer, never shorter, at the same batch size.
    v1, v2 = values(), values({"dynamo_rtt_ms": INPUTS["dynamo_rtt_ms"][0] * 2})
    expect(all(durations(v2, n)[fn] > durations(v1, n)[fn] for n in [1, 10, 100] for fn in ["design-job", "validation", "results"]),
           "slower round trips never shorten an invocation")
    # Every limit the model names is reached later, or never, when its tenant is smaller.
    small = model({"hot_tenant_share": 0.05})
    for name, c in small["crossings"].items():
        big = m["crossings"][name]["at_scale"]
        if c["kind"] == "key" and "due index" not in name and big is not None:
            expect(c["at_scale"] is None or c["at_scale"] >= big, f"a smaller hot tenant reaches '{name}' no sooner")
    # A smaller hot tenant loads its keys less.
    expect(small["scales"][3]["hot"]["feed_partition_wcu_s"] < rs[3]["hot"]["feed_partition_wcu_s"], "a smaller hot tenant writes its feed less")
    for name, value, unit, kind, source in [(k, *s) for k, s in INPUTS.items()]:
        expect(kind in (M, A, C, P) and source, f"input {name} says what it is and where it comes from")
    if problems:
        for p in problems:
            print("FAILED:", p)
        return 1
    print(f"ok: {len(INPUTS)} inputs, {len(rs)} scales, model consistent")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the model as JSON")
    ap.add_argument("--inputs", action="store_true", help="print every input with its kind and source (a Markdown table)")
    ap.add_argument("--check", action="store_true", help="check the model's consistency and exit")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override one input")
    ap.add_argument("--inputs-file", help="a JSON object of inputs over the defaults")
    ap.add_argument("--measure-logs", metavar="OPENQQ_BIN", help="measure the log_bytes_* inputs on a release `openqq up` and exit")
    ap.add_argument("--designs", type=int, default=200, help="designs for --measure-logs (200)")
    args = ap.parse_args(argv)
    if args.check:
        return check()
    if args.measure_logs:
        return measure_logs(args.measure_logs, args.designs)
    if args.inputs:
        show_inputs()
        return 0
    overrides = {}
    if args.inputs_file:
        with open(args.inputs_file) as f:
            overrides.update(json.load(f))
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name.strip()] = value
    m = model(overrides)
    if args.json:
        json.dump(m, sys.stdout, indent=2, sort_keys=True)
        print()
    else:
        show(m)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
