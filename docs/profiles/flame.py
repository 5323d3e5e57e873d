#!/usr/bin/env python3
"""folded stacks -> a small static SVG flame graph (frames under MIN_PCT of the total are dropped)."""
import sys, html, collections, zlib
MIN_PCT = 1.0
W, H = 1200, 16
def tree(path):
    root = {'n': 0, 'c': collections.OrderedDict()}
    for line in open(path):
        stack, _, n = line.rstrip('\n').rpartition(' ')
        n = int(n); root['n'] += n
        node = root
        for f in stack.split(';'):
            node = node['c'].setdefault(f, {'n': 0, 'c': collections.OrderedDict()})
            node['n'] += n
    return root
def color(name):
    h = zlib.crc32(name.split('::')[0].encode())
    return f"rgb({200 + h % 55},{80 + (h >> 8) % 120},{40 + (h >> 16) % 50})"
def main(src, dst, title):
    root = tree(src); total = root['n']; rects = []; depth_max = [0]
    def walk(node, x, depth):
        for name, child in sorted(node['c'].items(), key=lambda kv: -kv[1]['n']):
            pct = 100 * child['n'] / total
            if pct < MIN_PCT:
                continue
            w = W * child['n'] / total
            rects.append((x, depth, w, name, child['n'], pct)); depth_max[0] = max(depth_max[0], depth)
            walk(child, x, depth + 1)
            x += w
    walk(root, 0, 0)
    height = (depth_max[0] + 2) * H + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="monospace" font-size="11">',
           f'<text x="4" y="16" font-size="13">{html.escape(title)} ({total} samples; frames under {MIN_PCT} % left out; hover for names)</text>']
    for x, d, w, name, n, pct in rects:
        y = height - (d + 1) * H
        label = name if len(name) * 6.6 < w else (name[: int(w / 6.6) - 2] + '..' if w > 30 else '')
        out.append(f'<g><title>{html.escape(name)} ({n} samples, {pct:.1f} %)</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{max(w - 0.5, 0.5):.1f}" height="{H - 1}" fill="{color(name)}"/>'
                   + (f'<text x="{x + 2:.1f}" y="{y + H - 4}">{html.escape(label)}</text>' if label else '') + '</g>')
    out.append('</svg>')
    open(dst, 'w').write('\n'.join(out))
main(*sys.argv[1:4])
