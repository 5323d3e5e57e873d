#!/usr/bin/env python3
"""perf script (-F comm,tid,period,ip,sym --no-inline) -> per-stage tables and folded stacks."""
import re, sys, collections

STAGES = [
    # (stage, markers): the first stage any frame of the stack matches wins
    ("log", ("embedded::log::",)),
    ("object store", ("embedded::objects::",)),
    ("store", ("embedded::store::", "embedded::db::", "embedded::feed::", "embedded::accepted::",
               "embedded::idempotency::", "rusqlite::", "sqlite3")),
    ("validation", ("openqq_validation::", "openqq_fpga::")),
    ("design-job", ("openqq_design_job::",)),
    ("results", ("openqq_results::",)),
    ("API", ("openqq_api::", "axum::", "hyper::", "tower::", "hyper_util::")),
    ("consumer runtime", ("openqq_runtime::",)),
]
CALLERS = [("validation", ("openqq_validation::", "openqq_fpga::")), ("design-job", ("openqq_design_job::",)),
           ("results", ("openqq_results::",)), ("API", ("openqq_api::", "axum::", "hyper::")),
           ("consumer runtime", ("openqq_runtime::",))]

def simplify(sym):
    # drop generic arguments and hashes so the tables and flame graphs stay readable
    out, depth = [], 0
    for ch in sym:
        if ch == '<':
            depth += 1
            if depth == 1 and out and out[-1] not in (' ', ':', '(', '&'):
                out.append('<..>')
            continue
        if ch == '>':
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    s = ''.join(out).replace('::{{closure}}', '')
    s = re.sub(r'::h[0-9a-f]{16}$', '', s)
    s = s.replace(';', ',').strip()
    return s or sym

def samples(path):
    comm, frames = None, []
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if not line:
            if comm is not None:
                yield comm, frames
            comm, frames = None, []
            continue
        if not line.startswith('\t') and not line.startswith(' '):
            comm, frames = line.split()[0], []
            continue
        parts = line.strip().split(' ', 1)
        sym = parts[1] if len(parts) > 1 else '[unknown]'
        sym = re.sub(r' \(\S+\)$', '', sym)
        frames.append(sym)
    if comm is not None:
        yield comm, frames

def classify(frames, table):
    for stage, marks in table:
        for f in frames:
            if any(m in f for m in marks):
                return stage
    return None

def leaf(frames):
    if not frames:
        return '[unknown]'
    return simplify(frames[0])

def main(path, title, folded_out=None, top=5):
    by_stage = collections.Counter()
    self_by_stage = collections.defaultdict(collections.Counter)
    callers = collections.defaultdict(collections.Counter)
    folded = collections.Counter()
    total = 0
    for comm, frames in samples(path):
        total += 1
        stage = classify(frames, STAGES)
        joined = ' '.join(frames)
        if stage is None and 'blocking::pool' in joined and ('digest' in joined or 'std::fs::' in joined or 'fs::write' in joined):
            stage = "object store"  # the embedded object store hashes and does file I/O on the blocking pool
        if stage is None:
            kernel = frames and (frames[0].startswith('[') or 'entry_SYSCALL' in ''.join(frames[:3]))
            stage = "other (tokio, kernel, allocator)" if frames else "other"
        by_stage[stage] += 1
        self_by_stage[stage][leaf(frames)] += 1
        if stage in ("log", "store", "object store"):
            callers[stage][classify(frames, CALLERS) or ("blocking pool" if 'blocking::pool' in joined else "other")] += 1
        stack = [simplify(f) for f in reversed(frames) if f != '[unknown]']
        folded[';'.join([stage] + stack)] += 1
    print(f"### {title}\n")
    print(f"{total} samples.\n")
    print("| stage | samples | share |")
    print("|---|---:|---:|")
    for stage, n in by_stage.most_common():
        print(f"| {stage} | {n} | {100*n/total:.1f} % |")
    print()
    for stage, n in by_stage.most_common():
        print(f"**{stage}** ({100*n/total:.1f} % of all samples)", end='')
        if stage in callers:
            c = callers[stage]
            print(": called from " + ", ".join(f"{k} {100*v/n:.0f} %" for k, v in c.most_common()), end='')
        print("\n")
        print("| self symbol | share of stage |")
        print("|---|---:|")
        for sym, k in self_by_stage[stage].most_common(top):
            s = sym if len(sym) < 110 else sym[:107] + '...'
            s = s.replace('|', '\\|')
            print(f"| `{s}` | {100*k/n:.1f} % |")
        print()
    if folded_out:
        with open(folded_out, 'w') as f:
            for k, v in folded.items():
                f.write(f"{k} {v}\n")

if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
