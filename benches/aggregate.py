#!/usr/bin/env python3
"""Aggregates the measurements of benches/multi.sh (Python 3 standard library only).

    python3 benches/aggregate.py RESULTS        # writes aggregate.csv, aggregate.txt
                                                # (also printed) and plot.svg; exit status
    python3 benches/aggregate.py --show REC     # one line about one measurement

RESULTS holds settings.env (written by multi.sh) and run-N/SCENARIO.LABEL.rec, each
naming its wrk output (`wrk=`), its h2load output (`h2load=`, tls-h2) or, at a fixed
rate (RATE), its oha or paced JSON output (`oha=`, `paced=`).
A measurement is valid when multi.sh found nothing wrong (server up, a 2xx answer,
server and origin alive at the end) and its load output has requests and no errors:
for wrk neither "Non-2xx or 3xx responses" nor "Socket errors"; for oha (and paced) only 2xx/3xx
status codes and no error other than the requests still running at the deadline; for
h2load no failed, errored or timed-out request and no 4xx or 5xx.

Per scenario and column it reports the median, min, max and CV of req/s and of server
CPU microseconds per request, the median p50, p99 and (oha and paced only) p99.9, the largest
peak RSS, and two ratios
against the first variant: the ratio of the medians, and the median of the paired
ratios (variant / first variant measured in the same run, one after the other). The
paired ratio cancels the drift of a shared machine between runs, so the gate uses it
(falling back to the ratio of medians when no run has both valid). Gate: for each
variant after the first (never the peer) and each scenario, req/s ratio >= gate_rps and
CPU-per-request ratio <= gate_cpu.

Exit status: 0 every gate passed (or nothing to gate), 1 a gate failed, 3 a measurement
was invalid or missing.
"""

import csv
import glob
import json
import math
import os
import re
import statistics
import sys
from xml.sax.saxutils import escape

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def read_kv(path):
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v
    return out


def parse_latency(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text.strip())
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def empty_result():
    return {"requests": None, "rps": None, "p50_ms": None, "p99_ms": None, "p999_ms": None, "errors": []}


def text_lines(path):
    """The stripped lines of a load generator's text output; none if it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.strip() for line in f.read().splitlines()]
    except OSError:
        return []


def parse_wrk(path):
    """requests, req/s, p50 and p99 in ms and the error lines of one wrk output."""
    res = empty_result()
    for s in text_lines(path):
        m = re.match(r"(\d+) requests in", s)
        if m:
            res["requests"] = int(m.group(1))
        m = re.match(r"Requests/sec:\s+([0-9.]+)", s)
        if m:
            res["rps"] = float(m.group(1))
        m = re.match(r"99%\s+(\S+)", s)
        if m:
            res["p99_ms"] = parse_latency(m.group(1))
        m = re.match(r"50%\s+(\S+)", s)
        if m:
            res["p50_ms"] = parse_latency(m.group(1))
        if s.startswith("Non-2xx or 3xx responses") or s.startswith("Socket errors"):
            res["errors"].append(s)
    return res


# oha counts the requests still running when its duration ends as errors; they
# are the load generator's cut, not the server's fault.
OHA_DEADLINE = "aborted due to deadline"


def parse_oha(path):
    """requests, req/s, p50, p99 and p99.9 in ms and the errors of one oha JSON output
    (`oha --output-format json`; latencies there are in seconds)."""
    res = empty_result()
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        res["errors"].append(f"unreadable oha output: {e}")
        return res
    codes = data.get("statusCodeDistribution") or {}
    res["requests"] = sum(int(n) for n in codes.values())
    total_s = (data.get("summary") or {}).get("total")
    if total_s:
        res["rps"] = res["requests"] / float(total_s)
    pct = data.get("latencyPercentiles") or {}
    for key, name in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
        if pct.get(key) is not None:
            res[name] = float(pct[key]) * 1e3
    bad = {c: n for c, n in codes.items() if not re.fullmatch(r"[23]\d\d", str(c))}
    if bad:
        res["errors"].append("status codes " + ", ".join(f"{c}: {n}" for c, n in sorted(bad.items())))
    for msg, n in (data.get("errorDistribution") or {}).items():
        if OHA_DEADLINE not in msg:
            res["errors"].append(f"{msg}: {n}")
    return res


def parse_h2load(path):
    """requests and req/s of one h2load output (tls-h2 at its own pace), and its errors.
    h2load prints no latency percentiles: p50 and p99 stay empty."""
    res = empty_result()
    for s in text_lines(path):
        m = re.match(r"finished in [0-9.]+\w*, ([0-9.]+) req/s", s)
        if m:
            res["rps"] = float(m.group(1))
        m = re.match(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", s)
        if m:
            res["requests"] = int(m.group(4))
            failed, errored, timeout = (int(m.group(i)) for i in (5, 6, 7))
            if failed or errored or timeout:
                res["errors"].append(s)
        m = re.match(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", s)
        if m and (int(m.group(3)) or int(m.group(4))):
            res["errors"].append(s)
    return res


# benches/src/bin/paced.rs writes oha's field names.
PARSERS = {"wrk": parse_wrk, "oha": parse_oha, "paced": parse_oha, "h2load": parse_h2load}


def load_record(path):
    rec = read_kv(path)
    m = {
        "run": int(rec.get("run", "0") or 0),
        "scenario": rec.get("scenario", "?"),
        "variant": rec.get("variant", "?"),
        "kind": rec.get("kind", "variant"),
        "position": rec.get("position", ""),
        "note": rec.get("note", ""),
        "valid": rec.get("valid") == "1",
        "reason": rec.get("reason", ""),
        "requests": None, "rps": None, "p50_ms": None, "p99_ms": None, "p999_ms": None,
        "cpu_us": None, "sys_us": None, "rss_kb": None, "busy": None,
    }
    if m["valid"]:
        here = os.path.dirname(path)
        tool = next((t for t in PARSERS if rec.get(t)), "wrk")
        w = PARSERS[tool](os.path.join(here, rec.get(tool, "")))
        m.update(requests=w["requests"], rps=w["rps"], p50_ms=w["p50_ms"], p99_ms=w["p99_ms"], p999_ms=w["p999_ms"])
        if w["errors"]:
            m["valid"], m["reason"] = False, f"{tool}: " + "; ".join(w["errors"])
        elif not w["requests"] or not w["rps"]:
            m["valid"], m["reason"] = False, f"no requests in the {tool} output"
    if m["valid"]:
        try:
            ticks = float(rec["cpu_ticks_after"]) - float(rec["cpu_ticks_before"])
            m["cpu_us"] = ticks / float(rec["clk_tck"]) * 1e6 / m["requests"]
        except (KeyError, ValueError, ZeroDivisionError):
            m["valid"], m["reason"] = False, "no CPU reading"
        else:
            # The kernel's part (stime); records from before it was kept have none.
            try:
                sys_ticks = float(rec["sys_ticks_after"]) - float(rec["sys_ticks_before"])
                m["sys_us"] = sys_ticks / float(rec["clk_tck"]) * 1e6 / m["requests"]
            except (KeyError, ValueError, ZeroDivisionError):
                pass
            # How busy the server's CPU was with the server: well under 100 % means
            # the load generator, not the server, set the pace.
            try:
                m["busy"] = ticks / float(rec["clk_tck"]) / float(rec["wall_s"]) * 100
            except (KeyError, ValueError, ZeroDivisionError):
                pass
        try:
            m["rss_kb"] = int(rec.get("vmhwm_kb", ""))
        except ValueError:
            m["rss_kb"] = None
    return m


def show(path):
    m = load_record(path)
    head = f"run {m['run']}  {m['scenario']:<12} {m['variant']:<10}"
    if not m["valid"]:
        print(f"{head} INVALID: {m['reason']}")
        return
    p99 = f"{m['p99_ms']:.2f} ms" if m["p99_ms"] is not None else "?"
    rss = f"{m['rss_kb'] / 1024:.1f} MiB" if m["rss_kb"] else "?"
    busy = f"{m['busy']:.0f} %" if m["busy"] is not None else "?"
    note = f"  ({m['note']})" if m["note"] else ""
    print(f"{head} {m['rps']:>10.0f} req/s  {m['cpu_us']:7.2f} us CPU/req  p99 {p99}  "
          f"server busy {busy}  peak RSS {rss}{note}")


def spread(values):
    """median, min, max, CV in % (sample standard deviation over the mean)."""
    if not values:
        return None, None, None, None
    med = statistics.median(values)
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean * 100 if len(values) >= 2 and mean else 0.0
    return med, min(values), max(values), cv


def fmt(v, digits=2, empty="-"):
    return empty if v is None else f"{v:.{digits}f}"


def fmt_int(v, empty="-"):
    return empty if v is None else f"{v:,.0f}"


# === aggregate ===

def aggregate(results):
    settings = read_kv(os.path.join(results, "settings.env"))
    variants = settings.get("variants", "").split()
    columns = settings.get("columns", "").split() or variants
    scenarios = settings.get("scenarios", "").split()
    runs = int(settings.get("runs", "0") or 0)
    gate_rps = float(settings.get("gate_rps", "0.98"))
    gate_cpu = float(settings.get("gate_cpu", "1.02"))
    first = variants[0] if variants else None

    records = [load_record(p) for p in sorted(glob.glob(os.path.join(results, "run-*", "*.rec")))]
    for m in records:
        if m["scenario"] not in scenarios:
            scenarios.append(m["scenario"])
        if m["variant"] not in columns:
            columns.append(m["variant"])
    runs = max([runs] + [m["run"] for m in records])
    by = {(m["scenario"], m["variant"], m["run"]): m for m in records}
    kinds = {m["variant"]: m["kind"] for m in records}
    peer = settings.get("peer", "")
    # Scenarios the peer cannot serve (HAProxy and static files): no row.
    peer_skip = set(settings.get("peer_skip", "").split())

    rows, invalid = [], []
    for m in records:
        if not m["valid"]:
            invalid.append(m)
    missing = 0
    for s in scenarios:
        for v in columns:
            if v == peer and s in peer_skip:
                continue
            ms = [by.get((s, v, r)) for r in range(1, runs + 1)]
            missing += sum(1 for m in ms if m is None)
            ok = [m for m in ms if m and m["valid"]]
            kind = "peer" if v == peer or kinds.get(v) == "peer" else ("first" if v == first else "variant")
            row = {"scenario": s, "variant": v, "kind": kind, "valid": len(ok), "total": runs}
            row["rps"] = spread([m["rps"] for m in ok])
            row["cpu"] = spread([m["cpu_us"] for m in ok])
            row["rps_list"] = [m["rps"] for m in ok]
            row["cpu_list"] = [m["cpu_us"] for m in ok]
            sys_us = [m["sys_us"] for m in ok if m["sys_us"] is not None]
            row["sys"] = statistics.median(sys_us) if sys_us else None
            user_us = [m["cpu_us"] - m["sys_us"] for m in ok if m["sys_us"] is not None]
            row["user"] = statistics.median(user_us) if user_us else None
            for key, name in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p999")):
                values = [m[key] for m in ok if m[key] is not None]
                row[name] = statistics.median(values) if values else None
            rss = [m["rss_kb"] for m in ok if m["rss_kb"]]
            row["rss_kb"] = max(rss) if rss else None
            busy = [m["busy"] for m in ok if m["busy"] is not None]
            row["busy"] = statistics.median(busy) if busy else None
            # Paired ratios: this column against the first variant in the same run.
            pr, pc = [], []
            for r in range(1, runs + 1):
                a, b = by.get((s, first, r)), by.get((s, v, r))
                if a and b and a["valid"] and b["valid"]:
                    pr.append(b["rps"] / a["rps"])
                    pc.append(b["cpu_us"] / a["cpu_us"])
            row["paired_rps"], row["paired_cpu"] = pr, pc
            rows.append(row)

    base = {r["scenario"]: r for r in rows if r["variant"] == first}
    failed = False
    for row in rows:
        b = base.get(row["scenario"])
        ok_b = b and b["rps"][0] and row["rps"][0]
        row["rps_ratio"] = row["rps"][0] / b["rps"][0] if ok_b else None
        row["cpu_ratio"] = row["cpu"][0] / b["cpu"][0] if ok_b and b["cpu"][0] else None
        row["rps_pratio"] = statistics.median(row["paired_rps"]) if row["paired_rps"] else None
        row["cpu_pratio"] = statistics.median(row["paired_cpu"]) if row["paired_cpu"] else None
        if row["kind"] == "first":
            row["gate"] = "base"
        elif row["kind"] == "peer":
            row["gate"] = "peer"
        else:
            rr = row["rps_pratio"] if row["rps_pratio"] is not None else row["rps_ratio"]
            cr = row["cpu_pratio"] if row["cpu_pratio"] is not None else row["cpu_ratio"]
            if rr is None or cr is None:
                row["gate"] = "n/a"
            elif rr >= gate_rps and cr <= gate_cpu:
                row["gate"] = "PASS"
            else:
                row["gate"] = "FAIL"
                failed = True
            row["gate_rps_ratio"], row["gate_cpu_ratio"] = rr, cr

    write_csv(os.path.join(results, "aggregate.csv"), rows)
    text = render_text(settings, rows, invalid, missing, gate_rps, gate_cpu, first)
    with open(os.path.join(results, "aggregate.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(results, "plot.svg"), "w", encoding="utf-8") as f:
        f.write(render_svg(settings, rows, scenarios, columns))
    sys.stdout.write(text)
    if invalid or missing:
        return 3
    return 1 if failed else 0


def write_csv(path, rows):
    cols = ["scenario", "variant", "kind",
            "rps_median", "rps_min", "rps_max", "rps_cv_pct", "rps_ratio", "rps_ratio_paired_median",
            "cpu_us_per_req_median", "cpu_us_min", "cpu_us_max", "cpu_cv_pct", "cpu_ratio",
            "cpu_ratio_paired_median", "p99_ms_median", "peak_rss_kib_max", "server_busy_pct_median",
            "runs_valid",
            "runs_total", "gate", "p50_ms_median", "p999_ms_median",
            "user_us_per_req_median", "kernel_us_per_req_median"]

    def n(v, d):
        return "" if v is None else f"{v:.{d}f}"

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([r["scenario"], r["variant"], r["kind"],
                        n(r["rps"][0], 1), n(r["rps"][1], 1), n(r["rps"][2], 1), n(r["rps"][3], 2),
                        n(r["rps_ratio"], 4), n(r["rps_pratio"], 4),
                        n(r["cpu"][0], 3), n(r["cpu"][1], 3), n(r["cpu"][2], 3), n(r["cpu"][3], 2),
                        n(r["cpu_ratio"], 4), n(r["cpu_pratio"], 4),
                        n(r["p99"], 3), "" if r["rss_kb"] is None else r["rss_kb"], n(r["busy"], 1),
                        r["valid"], r["total"], r["gate"], n(r["p50"], 3), n(r["p999"], 3),
                        n(r["user"], 3), n(r["sys"], 3)])


def table(header, lines):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    out = []
    for i, line in enumerate([header] + lines):
        cells = [str(c).ljust(w) if j < 2 else str(c).rjust(w) for j, (c, w) in enumerate(zip(line, widths))]
        out.append("  ".join(cells).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def where_the_cpu_went(rows, peer):
    """User and kernel CPU per request (medians) and, against a peer, the least
    CPU ratio a column could reach by user-space work alone: its kernel time
    over the peer's whole CPU time per request."""
    if not any(r.get("sys") is not None for r in rows):
        return ""
    peer_cpu = {r["scenario"]: r["cpu"][0] for r in rows if peer and r["variant"] == peer}
    head = ["scenario", "variant", "user us/req", "kernel us/req", "kernel share"]
    if peer_cpu:
        head.append(f"kernel / {peer}'s CPU")
    lines = []
    for r in rows:
        if r.get("sys") is None:
            continue
        share = r["sys"] / r["cpu"][0] * 100 if r["cpu"][0] else None
        line = [r["scenario"], r["variant"], fmt(r["user"]), fmt(r["sys"]),
                "-" if share is None else f"{share:.0f} %"]
        if peer_cpu:
            other = peer_cpu.get(r["scenario"])
            line.append(fmt(r["sys"] / other, 3) if other and r["variant"] != peer else "-")
        lines.append(line)
    text = "\nwhere the CPU went: user and kernel time per request (medians, from utime and stime)"
    if peer_cpu:
        text += (f"; the last column is the CPU ratio against {peer} that a column would have "
                 "with no user-space cost at all")
    return text + "\n" + table(head, lines)


def render_text(settings, rows, invalid, missing, gate_rps, gate_cpu, first):
    t = []
    rate = settings.get("rate", "")
    load = f"{settings.get('pacer') or 'oha'} at a fixed {rate} req/s" if rate else "wrk at its own pace"
    t.append(f"ScalWS load benchmark: {settings.get('runs', '?')} runs x {settings.get('duration', '?')} s "
             f"(warm-up {settings.get('warmup', '?')} s), {settings.get('connections', '?')} connections, "
             f"{load}, pin {settings.get('pin', '?')}\n")
    peer = settings.get("peer", "")
    t.append(f"variants: {settings.get('variants', '')} (base: {first})"
             + (f"; peer: {peer} (not gated)" if peer else "") + "\n")
    t.append(f"gate: req/s ratio >= {gate_rps:g} and CPU/request ratio <= {gate_cpu:g}; ratios are the "
             f"median of the per-run paired ratios (variant / base in the same run)\n\n")

    def ratio(v, first_row):
        return fmt(v, 3)

    lines = []
    for r in rows:
        is_first = r["kind"] == "first"
        lines.append([r["scenario"], r["variant"], fmt_int(r["rps"][0]), ratio(r["rps_pratio"], is_first),
                      fmt(r["cpu"][0]), ratio(r["cpu_pratio"], is_first), r["gate"]])
    t.append(table(["scenario", "variant", "req/s", "ratio", "cpu_us/req", "ratio", "gate"], lines))

    t.append("\nspread (min-max, CV), ratio of medians\n")
    def span(lo, hi, f):
        return "-" if lo is None else f"{f(lo)}-{f(hi)}"

    def pct(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f} %"

    lines = []
    for r in rows:
        lines.append([r["scenario"], r["variant"],
                      span(r["rps"][1], r["rps"][2], fmt_int), pct(r["rps"][3]), fmt(r["rps_ratio"], 3),
                      span(r["cpu"][1], r["cpu"][2], fmt), pct(r["cpu"][3]), fmt(r["cpu_ratio"], 3)])
    t.append(table(["scenario", "variant", "req/s min-max", "CV", "ratio", "cpu_us min-max", "CV", "ratio"], lines))

    t.append("\npaired ratios per run (variant / base)\n")
    lines = []
    for r in rows:
        if r["kind"] == "first":
            continue
        lines.append([r["scenario"], r["variant"], " ".join(f"{x:.3f}" for x in r["paired_rps"]) or "-",
                      " ".join(f"{x:.3f}" for x in r["paired_cpu"]) or "-"])
    if lines:
        t.append(table(["scenario", "variant", "req/s", "cpu_us/req"], lines))
    else:
        t.append("(one variant: nothing to pair)\n")

    t.append(where_the_cpu_went(rows, settings.get("peer", "")))

    t.append("\nlatency p50, p99, p99.9 (medians; p99.9 from oha or paced only), peak RSS (largest VmHWM), "
             "server busy (median CPU time / wall time)\n")
    lines = []

    def lat(v):
        return "-" if v is None else fmt(v) + " ms"

    for r in rows:
        rss = "-" if r["rss_kb"] is None else f"{r['rss_kb'] / 1024:.1f} MiB"
        lines.append([r["scenario"], r["variant"], lat(r["p50"]), lat(r["p99"]), lat(r["p999"]),
                      rss, pct(r["busy"], 0), f"{r['valid']}/{r['total']}"])
    t.append(table(["scenario", "variant", "p50", "p99", "p99.9", "peak RSS", "server busy", "valid runs"], lines))

    if invalid or missing:
        t.append(f"\nINVALID: {len(invalid)} measurement(s) invalid, {missing} missing; "
                 "their figures are left out\n")
        for m in invalid:
            t.append(f"  run {m['run']} {m['scenario']} {m['variant']}: {m['reason']}\n")
    verdict = "FAIL" if any(r["gate"] == "FAIL" for r in rows) else "PASS"
    if invalid or missing:
        verdict = "INVALID"
    t.append(f"\nresult: {verdict}\n")
    return "".join(t)


# === plot ===

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"]
PEER_COLOUR = "#9c9c9c"


def nice_max(v):
    if v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v:
            return m * e
    return 10 * e


def short(v):
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def render_svg(settings, rows, scenarios, columns):
    colour = {}
    i = 0
    for c in columns:
        kind = next((r["kind"] for r in rows if r["variant"] == c), "variant")
        if kind == "peer":
            colour[c] = PEER_COLOUR
        else:
            colour[c] = PALETTE[i % len(PALETTE)]
            i += 1
    by = {(r["scenario"], r["variant"]): r for r in rows}
    width, panel_h, top, left = 960, 300, 70, 70
    group_w = (width - left - 30) / max(1, len(scenarios))
    bar_w = min(40, (group_w - 30) / max(1, len(columns)))
    height = top + 2 * (panel_h + 60) + 10
    o = []
    o.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height:.0f}" '
             f'viewBox="0 0 {width} {height:.0f}" font-family="sans-serif" font-size="12">')
    o.append(f'<rect width="{width}" height="{height:.0f}" fill="white"/>')
    title = (f"ScalWS multi.sh: median of {settings.get('runs', '?')} runs x {settings.get('duration', '?')} s, "
             f"{settings.get('connections', '?')} connections (whiskers: min-max)")
    o.append(f'<text x="{left}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>')
    # legend
    x = left
    for c in columns:
        label = c + (" (peer)" if colour[c] == PEER_COLOUR else "")
        o.append(f'<rect x="{x}" y="36" width="14" height="14" fill="{colour[c]}"/>')
        o.append(f'<text x="{x + 19}" y="48">{escape(label)}</text>')
        x += 30 + 7 * len(label)

    for p, (key, name) in enumerate((("rps", "requests per second"), ("cpu", "server CPU µs per request"))):
        y0 = top + p * (panel_h + 60) + 20
        vals = [by[(s, c)][key][2] for s in scenarios for c in columns
                if (s, c) in by and by[(s, c)][key][2] is not None]
        ymax = nice_max(max(vals) * 1.08) if vals else 1.0
        o.append(f'<text x="{left}" y="{y0 - 6}" font-weight="bold">{escape(name)}</text>')
        base_y = y0 + panel_h

        def y(v):
            return base_y - v / ymax * panel_h

        for k in range(6):
            v = ymax * k / 5
            o.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{width - 30}" y2="{y(v):.1f}" '
                     f'stroke="#dddddd" stroke-width="1"/>')
            tick = short(v) if v else "0"
            o.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#555555">{tick}</text>')
        o.append(f'<line x1="{left}" y1="{base_y}" x2="{width - 30}" y2="{base_y}" stroke="black"/>')
        o.append(f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{base_y}" stroke="black"/>')
        for si, s in enumerate(scenarios):
            gx = left + si * group_w
            gx0 = gx + (group_w - bar_w * len(columns)) / 2
            o.append(f'<text x="{gx + group_w / 2:.1f}" y="{base_y + 18}" text-anchor="middle">{escape(s)}</text>')
            for ci, c in enumerate(columns):
                r = by.get((s, c))
                if not r or r[key][0] is None:
                    continue
                med, lo, hi = r[key][0], r[key][1], r[key][2]
                bx = gx0 + ci * bar_w
                o.append(f'<rect x="{bx + 2:.1f}" y="{y(med):.1f}" width="{bar_w - 4:.1f}" '
                         f'height="{base_y - y(med):.1f}" fill="{colour[c]}">'
                         f'<title>{escape(f"{s} {c}: median {med:.2f}, min {lo:.2f}, max {hi:.2f}")}</title></rect>')
                cx = bx + bar_w / 2
                o.append(f'<line x1="{cx:.1f}" y1="{y(lo):.1f}" x2="{cx:.1f}" y2="{y(hi):.1f}" stroke="black"/>')
                for yy in (y(lo), y(hi)):
                    o.append(f'<line x1="{cx - 4:.1f}" y1="{yy:.1f}" x2="{cx + 4:.1f}" y2="{yy:.1f}" stroke="black"/>')
                o.append(f'<text x="{cx:.1f}" y="{y(hi) - 4:.1f}" text-anchor="middle" font-size="10">'
                         f'{short(med)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def main(argv):
    if len(argv) == 3 and argv[1] == "--show":
        show(argv[2])
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    return aggregate(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
