import sys, collections
sys.path.insert(0, __import__('os').path.dirname(__file__))
from analyze import samples, simplify
COMP = [
    ("log append (embedded log, SQLite)", ("embedded::log::",)),
    ("accepted marker (store write)", ("embedded::accepted::", "record_accepted")),
    ("idempotency (store)", ("embedded::idempotency::",)),
    ("quota (usage reads)", ("openqq_api::quota::", "embedded::objects::dir_bytes", "::usage")),
    ("other store calls", ("embedded::store::", "embedded::db::", "rusqlite::", "sqlite3")),
    ("fingerprint (SHA-256 of the body)", ("idempotency::fingerprint",)),
    ("record encoding (envelope to JSON)", ("to_record", "Envelope", "check_record_sizes")),
    ("body parse and check", ("openqq_api::body::parse", "openqq_api::designs::submission", "into_spec", "DesignSpec::check", "serde_json::de", "serde_path_to_error")),
    ("auth (JWT)", ("openqq_api::auth::", "jsonwebtoken", "ring::", "hmac")),
    ("request limiter", ("openqq_api::limit::", "embedded::limiter", "limiter::")),
    ("body read (tenant guard)", ("openqq_api::tenant_guard::", "openqq_api::body::read_within", "BodyExt")),
    ("request log and metrics", ("openqq_api::observe::", "openqq_telemetry::", "tracing_subscriber", "metrics_exporter", "metrics::")),
    ("worker pool", ("openqq_api::pool::",)),
    ("HTTP (hyper, socket I/O)", ("hyper::", "hyper_util::", "tcp_", "sock_", "__send", "__recv", "sys_sendto", "sys_recvfrom", "writev", "ksys_write", "ksys_read")),
    ("other API handler code", ("openqq_api::", "axum::")),
]
def comp(frames):
    for name, marks in COMP:
        for f in frames:
            if any(m in f for m in marks):
                return name
    return "tokio scheduling, allocator, other"
def main(path, title, folded_out):
    c = collections.Counter(); selfs = collections.defaultdict(collections.Counter); folded = collections.Counter(); total = 0
    for comm, frames in samples(path):
        total += 1
        k = comp(frames)
        c[k] += 1
        selfs[k][simplify(frames[0]) if frames else '?'] += 1
        folded[';'.join([k] + [simplify(f) for f in reversed(frames) if f != '[unknown]'])] += 1
    print(f"### {title}\n\n{total} samples.\n\n| part of the route | share | top self symbols |\n|---|---:|---|")
    for k, n in c.most_common():
        tops = ", ".join(f"`{s[:60]}` {100*v/n:.0f} %" for s, v in selfs[k].most_common(3)).replace('|', '\\|')
        print(f"| {k} | {100*n/total:.1f} % | {tops} |")
    with open(folded_out, 'w') as f:
        for k, v in folded.items(): f.write(f"{k} {v}\n")
main(sys.argv[1], sys.argv[2], sys.argv[3])
