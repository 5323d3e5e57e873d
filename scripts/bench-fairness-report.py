#!/usr/bin/env python3
"""Renders docs/BENCHMARKS-fairness.md from the `openqq load` results that
scripts/bench-fairness.sh leaves in DIR (one JSON file per run). Standard library only."""

import json
import os
import platform
import sys
from datetime import date

d = sys.argv[1]


def run(name):
    with open(os.path.join(d, name + ".json")) as f:
        return json.load(f)


def cpu():
    try:
        with open("/proc/cpuinfo") as f:
            model = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{os.cpu_count()} vCPU {model}"


def lat(c, key="latency_ms"):
    l = c[key]
    return [l["p50"], l["p95"], l["p99"], l["max"]]


def row(label, c, key="latency_ms"):
    cells = [label, c["sent"], c["ok"], c["rate_limited"], c["server_errors"], c["timeouts"] + c["transport_errors"]] + lat(c, key)
    return "| " + " | ".join(str(x) for x in cells) + " |"


HEAD = "| run · class | sent | 2xx | 429 | 5xx | timeouts+errors | p50 ms | p95 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"

noisy = {k: run("noisy-" + k) for k in ["on-steady", "on-burst", "off-steady", "off-burst"]}
pool = {k: run("pool-" + k) for k in ["unbounded", "bounded"]}
cfg = noisy["on-burst"]["config"]
b = cfg["burst"]


def table(section):
    out = [HEAD]
    for k, label in [("on-steady", "limiter ON, no burst"), ("on-burst", "limiter ON, burst"), ("off-steady", "limiter OFF, no burst"), ("off-burst", "limiter OFF, burst")]:
        for cls in ["compliant", "noisy"]:
            out.append(row(f"{label} · {cls}", noisy[k][section][cls]))
    return "\n".join(out)


def verdict(ok):
    return "**met**" if ok else "**not met**"


on_s, on_b = noisy["on-steady"], noisy["on-burst"]
comp = on_b["classes"]["compliant"]
comp_errors = comp["sent"] - comp["ok"]
ratio_all = comp["latency_ms"]["p99"] / on_s["classes"]["compliant"]["latency_ms"]["p99"]
ratio_win = on_b["during_burst"]["compliant"]["latency_ms"]["p99"] / on_s["during_burst"]["compliant"]["latency_ms"]["p99"]
nz = on_b["classes"]["noisy"]
off_comp = noisy["off-burst"]["during_burst"]["compliant"]

ub, bd = pool["unbounded"]["classes"]["compliant"], pool["bounded"]["classes"]["compliant"]
p99_ub, p99_bd = ub["ok_or_timeout_latency_ms"]["p99"], bd["ok_or_timeout_latency_ms"]["p99"]


def prow(label, c):
    cells = [label, c["sent"], c["ok"], c["server_errors"], c["timeouts"], c["transport_errors"]] + lat(c, "ok_or_timeout_latency_ms")
    return "| " + " | ".join(str(x) for x in cells) + " |"


print(f"""# Benchmark 2 — fairness and bursts

What it answers: does one tenant's burst hurt the others, with the per-tenant limiter on and
off; and does the bounded pool keep latency of accepted work low under overload, compared with
a task per request. Everything is measured from outside with `openqq load` against a release
`openqq up` on 127.0.0.1, each server on a fresh data dir.

`openqq load` is open loop: each tenant's requests go out on a fixed schedule whether or not
earlier ones were answered, and latency runs from the *scheduled* send time to the end of the
response body, so neither a slow server nor a busy load generator can hide latency by sending
less (no coordinated omission). Requests are `GET /v1/designs?limit=1`: authenticated, rate
limited, through the pool, a store read. Without a slow dependency the API answers these in well
under a millisecond, so nothing would queue; the server therefore runs with its dev-only
simulated downstream (`--simulated-downstream-latency`, `--simulated-downstream-capacity`):
every request, while holding a pool worker, calls an imaginary dependency that takes a fixed
time and serves a fixed number of calls at once (think: a database with a small connection pool).

## Command

```sh
scripts/bench-fairness.sh                    # release build, both experiments, rewrites this file
SECONDS_PER_RUN=10 scripts/bench-fairness.sh # shorter runs (default 15 s each)
```

The raw results are in `docs/bench-fairness/*.json` (one `openqq load` results file per run).
Measured {date.today().isoformat()} on {cpu()}; the load generator and the server share the cores.

## 1. Noisy tenant

{cfg["compliant_tenants"]} compliant tenants and {cfg["noisy_tenants"]} noisy tenant, {cfg["rate_per_tenant"]:g} requests/s each, evenly
spaced, for {cfg["duration_s"]:g} s; the noisy tenant sends {b["factor"]:g}× its rate from {b["start_s"]:g} s for {b["length_s"]:g} s. Downstream 20 ms,
8 at once (≈ 400 requests/s); pool of 8 workers and a queue of 32. Steady load is 250/s; the
burst adds 225/s, so without a limit the server is overloaded (475/s) for the burst.
Limiter ON: `--rate-limit 10/250ms` per tenant (the compliant 25/s is 6–7 per 250 ms).
Limiter OFF: `--rate-limit 1000000/1s`. Latency is over every answered request (2xx, 429, 503).

During the burst window ({b["start_s"]:g}–{b["start_s"] + b["length_s"]:g} s; for the steady runs the same window of time):

{table("during_burst")}

Whole run:

{table("classes")}

Goals (limiter ON, burst against limiter ON, no burst):

- Compliant tenants see no errors: {comp_errors} non-2xx/failed of {comp["sent"]} — {verdict(comp_errors == 0)}.
- Compliant p99 within 1.5× of the no-burst run: {ratio_win:.2f}× in the burst window, {ratio_all:.2f}× over
  the whole run — {verdict(ratio_win <= 1.5 and ratio_all <= 1.5)}.
- The noisy tenant gets 429s and never a 5xx: {nz["rate_limited"]} × 429, {nz["server_errors"]} × 5xx — {verdict(nz["rate_limited"] > 0 and nz["server_errors"] == 0)}.
- For contrast, limiter OFF during the burst, compliant tenants: {off_comp["server_errors"]} × 503 of {off_comp["sent"]}, p99 {off_comp["latency_ms"]["p99"]} ms.

## 2. Unbounded vs bounded pool

{pool["bounded"]["config"]["compliant_tenants"]} tenants at {pool["bounded"]["config"]["rate_per_tenant"]:g}/s = {pool["bounded"]["config"]["compliant_tenants"] * pool["bounded"]["config"]["rate_per_tenant"]:g} requests/s for {pool["bounded"]["config"]["duration_s"]:g} s against a downstream of 50 ms, 8 at once
(≈ 160/s): 1.5× overload. Client timeout {pool["bounded"]["config"]["timeout_ms"] / 1000:g} s. Limiter off. Unbounded: `--workers 1000000 --queue 0`
(every request gets a task at once and waits for the downstream); bounded: `--workers 8 --queue 16`.
Latency is over the accepted work: 2xx answers plus timeouts (counted at the moment the client
gave up, so the unbounded figures are a floor).

| server | sent | 2xx | 503 | timeouts | errors | p50 ms | p95 ms | p99 ms | max ms |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{prow("unbounded (task per request)", ub)}
{prow("bounded (8 workers, queue 16)", bd)}

Goals:

- Bounded p99 ≤ ⅓ of unbounded: {p99_bd} ms vs {p99_ub} ms ({p99_bd / p99_ub:.3f}×) — {verdict(p99_bd * 3 <= p99_ub)}.
- No timeouts for accepted work in the bounded pool: {bd["timeouts"]} — {verdict(bd["timeouts"] == 0)}.
- Bounded goodput: {bd["ok"]} answered 2xx vs {ub["ok"]} unbounded, out of {bd["sent"]} sent.

## Reading it

- The limiter runs before the pool (authentication and the tenant's limit are the outer layer),
  so a rejected burst costs a token check and a limiter decision, never a pool worker or a slot
  of the downstream. With the limiter ON the noisy tenant is cut to 40 admitted requests/s
  (10 per 250 ms) and everyone else keeps the no-burst latency; the small rise in compliant
  p99 comes from the admitted requests arriving in clumps of up to 10 at the start of each
  window.
- With the limiter OFF the pool still protects the *server* (no timeouts, bounded latency) but
  not the *tenants*: the noisy burst fills the queue, everyone waits for a full queue (about
  (8 + 32) / 400 per s ≈ 100 ms), and compliant tenants take their share of the 503s. Fairness
  is the limiter's job; the pool only bounds the damage.
- Unbounded, the backlog grows by the excess (about 80 requests/s) and so does everybody's wait,
  until the client gives up at its timeout; most of the late work is wasted. It answers more
  2xx in total only because it keeps draining its backlog after the last send. Bounded, the
  server answers at the downstream's capacity and refuses the excess at once with 503 and
  `Retry-After: 1`, so accepted work waits at most for a full queue (≈ (8 + 16) / 160 per s).

## What limits these numbers

- The simulated downstream is an idealised FIFO dependency; the real request path (JWT check,
  limiter, a store read) takes well under a millisecond here and is not what is measured. The
  results show the overload *policy*, not the API's raw speed.
- Two vCPUs are shared by the load generator, the server and whatever else runs on the machine;
  at these rates (≤ 475 requests/s) neither process is CPU-bound, and tokio's 1 ms timer
  resolution adds about 1 ms to every simulated call.
- One run of each, {cfg["duration_s"]:g} s long; evenly spaced arrivals (`openqq load --arrivals poisson` gives
  random gaps). The in-process limiter was used; the Redis limiter (`--redis-url`) was not
  exercised here (its throughput is Benchmark 1, `docs/BENCHMARKS-limiter.md`).
- Plots are not drawn; the raw per-run JSON has everything needed to draw them.
""")
