#!/usr/bin/env python3
"""Draws results/scale/scale.svg (standard library only) from the runs in results/scale/*/: wall time, CPU time
(user + system) and peak RSS of `dedup --memory-limit 6G` against the number of documents, and writes
results/scale/scale.csv with the same figures and the recall."""
import json, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
rows = []
for label in sorted(os.listdir(HERE)):
    d = os.path.join(HERE, label)
    if not os.path.isfile(os.path.join(d, "time.txt")):
        continue
    t = open(os.path.join(d, "time.txt")).read()
    s = open(os.path.join(d, "summary.txt")).read()
    docs = int(re.search(r"read (\d+) records", s).group(1))
    wall = t.split("Elapsed (wall clock) time (h:mm:ss or m:ss): ")[1].split()[0].split(":")
    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    cpu = float(re.search(r"User time \(seconds\): ([\d.]+)", t).group(1)) + float(
        re.search(r"System time \(seconds\): ([\d.]+)", t).group(1))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) * 1024
    rec = {}
    if os.path.exists(os.path.join(d, "recall.json")):
        rec = json.load(open(os.path.join(d, "recall.json")))
    # How the run was taken (a line in conditions.txt; the runs before it were on a shared machine).
    cond_path = os.path.join(d, "conditions.txt")
    cond = open(cond_path).read().strip() if os.path.exists(cond_path) else "shared machine (load 12-800): wall disturbed"
    rows.append(dict(label=label, docs=docs, wall=wall, cpu=cpu, rss=rss, recall=rec.get("recall"), cond=cond,
                     recall_se=rec.get("recall_standard_error"), predicted=rec.get("scurve_prediction")))
rows.sort(key=lambda r: r["docs"])
with open(os.path.join(HERE, "scale.csv"), "w") as f:
    f.write("documents,wall_s,cpu_s,peak_rss_bytes,recall,recall_se,scurve_prediction\n")
    for r in rows:
        f.write(f"{r['docs']},{r['wall']:.1f},{r['cpu']:.1f},{r['rss']},{r['recall']},{r['recall_se']},"
                f"{r['predicted']}\n")

W, H, M = 420, 300, 55
def panel(x0, title, ylabel, series, ymax, limit=None):
    out = [f'<g transform="translate({x0},0)">', f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    xmax = max(r["docs"] for r in rows) * 1.05
    X = lambda v: M + (W - M - 15) * v / xmax
    Y = lambda v: H - M + 10 - (H - M - 30) * v / ymax
    out.append(f'<line x1="{M}" y1="{Y(0)}" x2="{W-15}" y2="{Y(0)}" stroke="black"/>')
    out.append(f'<line x1="{M}" y1="{Y(0)}" x2="{M}" y2="{Y(ymax)}" stroke="black"/>')
    for i in range(6):
        v = ymax * i / 5
        out.append(f'<text x="{M-5}" y="{Y(v)+4}" text-anchor="end" font-size="10">{v:.3g}</text>')
    for r in rows:
        out.append(f'<text x="{X(r["docs"])}" y="{Y(0)+15}" text-anchor="middle" font-size="10">{r["docs"]/1e6:g}M</text>')
    out.append(f'<text x="{W/2}" y="{H-8}" text-anchor="middle" font-size="11">documents</text>')
    out.append(f'<text x="14" y="{H/2}" transform="rotate(-90 14 {H/2})" text-anchor="middle" font-size="11">{ylabel}</text>')
    if limit:
        v, name = limit
        out.append(f'<line x1="{M}" y1="{Y(v)}" x2="{W-15}" y2="{Y(v)}" stroke="red" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{W-17}" y="{Y(v)-4}" text-anchor="end" font-size="10" fill="red">{name}</text>')
    for j, (name, key, colour) in enumerate(series):
        pts = " ".join(f"{X(r['docs'])},{Y(key(r))}" for r in rows)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for r in rows:
            out.append(f'<circle cx="{X(r["docs"])}" cy="{Y(key(r))}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{M+10}" y="{75+14*j}" font-size="11" fill="{colour}">{name}</text>')
    out.append("</g>")
    return "\n".join(out)

tmax = max(max(r["wall"], r["cpu"]) for r in rows) / 60
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2*W}" height="{H}" font-family="sans-serif">',
       '<rect width="100%" height="100%" fill="white"/>',
       panel(0, "dedup --memory-limit 6G, 2 threads: time", "minutes",
             [("wall (1M, 4M: shared machine, disturbed)", lambda r: r["wall"] / 60, "#1f77b4"),
              ("CPU (user + system)", lambda r: r["cpu"] / 60, "#ff7f0e")], max(tmax * 1.1, 10.5),
             (10, "target: 10 min")),
       panel(W, "peak RSS (/usr/bin/time -v)", "GiB",
             [("peak RSS", lambda r: r["rss"] / 2**30, "#2ca02c")], 7, (6, "limit 6 GiB")),
       "</svg>"]
open(os.path.join(HERE, "scale.svg"), "w").write("\n".join(svg))
for r in rows:
    print(r)

# The markdown table README.md and BENCHMARKING.md quote.
with open(os.path.join(HERE, "scale.md"), "w") as f:
    f.write("| documents | text (gzip'd) | CPU time (user + sys) | wall time | peak RSS | recall vs planted truth (± s.e.) | S-curve prediction | conditions |\n")
    f.write("|---:|---:|---:|---:|---:|---:|---:|---|\n")
    for r in rows:
        text = {1_000_000: "1.5 GB (0.76 GB)", 4_000_000: "6.0 GB (3.0 GB)", 10_000_000: "15 GB (7.6 GB)"}.get(r["docs"], "")
        rec = "" if r["recall"] is None else f"{r['recall']:.4f} ± {r['recall_se']:.4f}"
        pred = "" if r["predicted"] is None else f"{r['predicted']:.4f}"
        f.write(f"| {r['docs']:,} | {text} | {r['cpu']:.0f} s | {r['wall']/60:.1f} min | {r['rss']/1e9:.2f} GB | {rec} | {pred} | {r['cond']} |\n")
print(open(os.path.join(HERE, "scale.md")).read())
