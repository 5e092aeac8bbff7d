"""The human-readable report: one self-contained HTML page (PNGs inlined, also written beside it)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from canary.judge import histogram as H
from canary.judge.aggregates import Aggregates
from canary.judge.brief import Brief
from canary.judge.evidence import Decision

COLOURS = {"canary": "#d95f02", "baseline": "#1b9e77", "PROMOTE": "#1b7e3c", "ROLLBACK": "#b2182b",
           "INCONCLUSIVE": "#8c6d1f"}


def png_bytes(fig) -> bytes:
    """A matplotlib figure as the PNG the reports write and inline."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def img_tag(png: bytes, alt: str) -> str:
    """A PNG inlined into a page, so the page is self-contained."""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _png(fig, out: Path, name: str) -> str:
    png = png_bytes(fig)
    (out / name).write_bytes(png)
    return img_tag(png, name)


def _plots(out: Path, verdict: dict, agg: Aggregates) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = []
    warm_end = verdict["window"]["warmup_end_ms"] or 0
    buckets = [b for b in agg.buckets() if b >= warm_end]
    # Latency distributions, both lanes overlaid (post warm-up).
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    for ax, source in zip(axes, ("e2e_latency_ms", "produce_latency_ms"), strict=True):
        for lane in ("baseline", "canary"):
            hist = H.merge(agg.hist(lane, source, b) for b in buckets)
            total = sum(hist.values())
            if total:
                keys = sorted(hist)
                ax.step([H.representative(k) or 0.005 for k in keys], [hist[k] / total for k in keys], where="mid",
                        color=COLOURS[lane], label=f"{lane} (n={total})")
        ax.set_xscale("log")
        ax.set_title(source.replace("_", " "))
        ax.set_xlabel("ms")
        ax.set_ylabel("share per 2 % bin")
        ax.legend()
    images.append(_png(fig, out, "latency_distribution.png"))
    plt.close(fig)
    # Per-bucket time series: p99 e2e latency and failure share, both lanes.
    every = agg.buckets()
    if every:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
        t0 = every[0]
        for lane in ("baseline", "canary"):
            xs = [(b - t0) / 1000 for b in every]
            p99 = [H.quantile(agg.hist(lane, "e2e_latency_ms", b), 0.99) for b in every]
            axes[0].plot(xs, [float("nan") if v is None else v for v in p99], color=COLOURS[lane], label=lane)
            shares = []
            for b in every:
                o = agg.outcomes(lane, b)
                n = sum(o.values())
                bad = sum(v for k, v in o.items() if k != "delivered")
                shares.append(100 * bad / n if n else float("nan"))
            axes[1].plot(xs, shares, color=COLOURS[lane], label=lane)
        for ax, title in zip(axes, ("e2e latency p99 (ms)", "non-delivered outcomes (%)"), strict=True):
            ax.axvspan(0, (warm_end - t0) / 1000, color="#dddddd", label="warm-up")
            ax.set_title(title)
            ax.set_xlabel("seconds since the first bucket")
            ax.legend()
        images.append(_png(fig, out, "time_series.png"))
        plt.close(fig)
    return images


def lane_value(lane: dict) -> str:
    """A lane's value of one metric in a table cell: a share in %, else the value."""
    value = lane.get("value")
    if value is None:
        return "–"
    return f"{100 * value:.3g} %" if "rate" in lane else f"{value:.4g}"


def effect_text(effect: dict) -> str:
    """A metric's relative effect, canary against baseline, in a table cell."""
    relative = effect.get("relative")
    return "–" if relative is None else f"{100 * relative:+.3g} %"


def write_report(out: Path, verdict: dict, agg: Aggregates) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    images = _plots(out, verdict, agg)
    rows = []
    for m in verdict["metrics"]:
        colour = {Decision.FAIL: "#f4cccc", Decision.PASS: "#d9ead3"}.get(m["decision"], "#fff2cc")
        rows.append(
            f'<tr style="background:{colour}"><td>{html.escape(m["name"])}{" ⚑" if m["critical"] else ""}</td>'
            f'<td>{m["decision"]}</td><td>{lane_value(m["canary"])}</td><td>{lane_value(m["baseline"])}</td>'
            f'<td>{effect_text(m["effect"])}</td><td>{html.escape(m["reason"])}</td></tr>')
    judged = Brief.of(verdict)
    dq = verdict["data_quality"]
    excluded = ", ".join(f"{k}: {v}" for k, v in dq["excluded"].items()) or "none"
    lanes = ", ".join(f"{k}: {v['observations']} observations on {v['partitions']} partition(s)"
                      for k, v in verdict["lanes"].items())
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Canary verdict: {judged.verdict}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}td,th{{padding:4px 8px;text-align:left;
vertical-align:top;font-size:90%}}table{{border-collapse:collapse}}tr{{border-bottom:1px solid #ccc}}</style></head>
<body><h1 style="color:{COLOURS[judged.verdict]}">{judged.verdict} <small>score {verdict['score']} · exit code
{judged.outcome.exit_code}</small></h1>
<p><b>{html.escape(judged.reason)}</b></p>
<p>{'final verdict' if verdict['final'] else 'interim look'}; {lanes};
{verdict['window']['buckets_analysed']} buckets of {verdict['window']['bucket_ms'] / 1000:g} s analysed after
{verdict['window']['buckets_warmup']} warm-up bucket(s); false-rollback budget alpha {verdict['alpha']['total']}.</p>
<p>Excluded observations: {html.escape(excluded)}; empty lanes: {', '.join(dq['empty_lanes']) or 'none'}.</p>
{''.join(images)}
<h2>Metrics</h2><table><tr><th>metric (⚑ critical)</th><th>decision</th><th>canary</th><th>baseline</th>
<th>effect</th><th>reason</th></tr>{''.join(rows)}</table>
<p style="color:#666">verdict schema {verdict['schema']} v{verdict['schema_version']}; details in verdict.json</p>
</body></html>"""
    path = out / "report.html"
    path.write_text(page)
    return path
