"""The validation report: Markdown and PNG figures from a campaign's results.

:func:`write_report` writes ``report.md``, ``results.json`` (every number behind it) and
``figures/*.png`` of a :class:`~qmodel.campaign.runner.Campaign` into the output folder;
:func:`summary_text` is the table ``qmodel validate`` prints. The figures themselves are drawn
by :mod:`qmodel.campaign.figures`. Everything here reads the campaign's plain-data rows;
nothing is recomputed.
"""

from __future__ import annotations

import datetime
import json
import textwrap
from pathlib import Path

import numpy as np

from . import figures as figs
from .summaries import median_worst

__all__ = ["summary_groups", "summary_text", "summary_markdown", "write_report"]


def _pct(x) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.1%}"


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1e3:.3f}"


def _groups(rows):
    """(label, rows) per model family and instance count, families first."""
    ok = [r for r in rows if not r.get("error_message")]
    out = []
    for fam in ("exact", "numerical", "approximation", "not modelled"):
        sel = [r for r in ok if r["family"] == fam]
        if not sel:
            continue
        out.append((fam if fam != "not modelled" else "not modelled (simulated only)", sel))
        if fam == "not modelled":
            continue
        # single nodes by instance count, clusters apart (their error mixes the router's in)
        subs = [(f"  {fam}, {c} instance{'s' if c > 1 else ''}",
                 [r for r in sel if r["instances"] == c and r["nodes"] == 1])
                for c in sorted({r["instances"] for r in sel})]
        subs.append((f"  {fam}, clusters", [r for r in sel if r["nodes"] > 1]))
        subs = [(label, part) for label, part in subs if part]
        if len(subs) > 1:
            out += subs
    return out


def summary_groups(rows) -> list[dict]:
    """Median and worst |relative error| per model family and instance count, with the baseline.

    Returns
    -------
    list of dict
        One per group: ``label``, ``configs``, ``passed``, ``p95``/``p99`` (median, worst),
        ``baseline_p99`` (median, worst) over the same configurations, and ``predict_seconds``
        and ``simulate_seconds`` (median, worst).
    """
    out = []
    for label, sel in _groups(rows):
        g = {"label": label, "configs": len(sel),
             "passed": sum(r["verdict"] == "pass" for r in sel)}
        modelled = [r for r in sel if r["modelled"]]
        for q in ("p50", "p95", "p99"):
            e = [r["error"][q] for r in modelled]
            g[q] = median_worst(e) if e else None
        b = [r["baseline"]["error"]["p99"] for r in sel if "error" in r["baseline"]]
        g["baseline_p99"] = median_worst(b) if b else None
        for key in ("predict_seconds", "simulate_seconds"):
            g[key] = median_worst([r[key] for r in sel])
        out.append(g)
    return out


def _pair(v) -> str:
    return "-" if v is None else f"{_pct(v[0])} / {_pct(v[1])}"


def summary_text(rows) -> str:
    """The summary as a fixed-width table (what ``qmodel validate`` prints)."""
    head = (f"{'model family':32} {'configs':>7} {'pass':>5}  {'p95 |err| med/worst':>20}  "
            f"{'p99 |err| med/worst':>20}  {'baseline p99':>15}  {'predict s med/worst':>19}")
    lines = [head, "-" * len(head)]
    for g in summary_groups(rows):
        passed = "-" if g["label"].startswith("not modelled") else str(g["passed"])
        t = g["predict_seconds"]
        lines.append(f"{g['label']:32} {g['configs']:7} {passed:>5}  {_pair(g['p95']):>20}  "
                     f"{_pair(g['p99']):>20}  {_pair(g['baseline_p99']):>15}  "
                     f"{t[0]:8.3f} / {t[1]:7.3f}")
    errors = sum(1 for r in rows if r.get("error_message"))
    if errors:
        lines.append(f"{errors} configuration(s) raised an error (see the report)")
    return "\n".join(lines)


def summary_markdown(rows) -> str:
    """The summary as a Markdown table."""
    lines = ["| model family | configs | pass | p50 \\|err\\| median / worst | "
             "p95 \\|err\\| median / worst | p99 \\|err\\| median / worst | "
             "textbook baseline p99 \\|err\\| median / worst | predict s median / worst | "
             "simulate s median |",
             "|---|---:|---:|---|---|---|---|---|---:|"]
    for g in summary_groups(rows):
        label = g["label"].strip()
        label = f"&nbsp;&nbsp;{label}" if g["label"].startswith("  ") else f"**{label}**"
        passed = "-" if "not modelled" in label else f"{g['passed']}/{g['configs']}"
        lines.append(f"| {label} | {g['configs']} | {passed} | {_pair(g['p50'])} | "
                     f"{_pair(g['p95'])} | {_pair(g['p99'])} | {_pair(g['baseline_p99'])} | "
                     f"{g['predict_seconds'][0]:.3f} / {g['predict_seconds'][1]:.3f} | "
                     f"{g['simulate_seconds'][0]:.3f} |")
    return "\n".join(lines)


def _config_table(rows) -> str:
    lines = ["| configuration | family | p50 pred / sim (ms) | p95 pred / sim (ms) | "
             "p99 pred / sim [99% CI] (ms) | p99 err | baseline p99 err | predict s | "
             "simulate s | verdict |",
             "|---|---|---|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        if r.get("error_message"):
            lines.append(f"| {r['name']} | error | | | | | | | | {r['error_message']} |")
            continue
        s, p = r["simulated"], r["predicted"] or {}
        lo, hi = s["ci99"]["p99"]
        err = r["error"]["p99"] if r["error"] else None
        base = r["baseline"].get("error", {}).get("p99")
        verdict = {"pass": "pass", "fail": "**FAIL**"}.get(r["verdict"], r["verdict"])
        lines.append(
            f"| {r['name']} | {r['family']} | {_ms(p.get('p50'))} / {_ms(s['p50'])} | "
            f"{_ms(p.get('p95'))} / {_ms(s['p95'])} | {_ms(p.get('p99'))} / {_ms(s['p99'])} "
            f"[{lo * 1e3:.3f}, {hi * 1e3:.3f}] | {'-' if err is None else f'{err:+.1%}'} | "
            f"{'-' if base is None else f'{base:+.1%}'} | {r['predict_seconds']:.3f} | "
            f"{r['simulate_seconds']:.3f} | {verdict} |")
    return "\n".join(lines)


def _failures(rows) -> str:
    bad = [r for r in rows if r["verdict"] in ("fail", "error")]
    if not bad:
        return "None: every modelled configuration is within its tolerance.\n"
    lines = []
    for r in bad:
        if r["verdict"] == "error":
            lines.append(f"- **{r['name']}**: {r['error_message']}")
            continue
        missed = [f"{q} predicted {r['predicted'][q] * 1e3:.3f} ms, allowed "
                  f"[{c['band'][0] * 1e3:.3f}, {c['band'][1] * 1e3:.3f}] ms "
                  f"({r['error'][q]:+.1%})"
                  for q, c in r["checks"].items() if not c["ok"]]
        lines.append(f"- **{r['name']}** ({r['family']}, {r['method']}): " + "; ".join(missed))
    return "\n".join(lines) + "\n"


def _routers_section(routers, fig) -> str:
    if not routers:
        return ""
    r0 = routers[0]
    lines = ["## Routers", "",
             f"{r0['nodes']} copies of `{r0['node']}`"
             f" behind each router, from `qmodel.compare_routers`, each also simulated. Routers "
             "the theory does not model (or not at this size and load) show the simulation "
             "only.", "", f"![router comparison]({fig})", "",
             "| router | load | p99 predicted (ms) | p99 simulated [99% CI] (ms) | error | "
             "mean batch (sim) | verdict / why not modelled |",
             "|---|---:|---:|---|---:|---:|---|"]
    for r in routers:
        if r.get("error_message"):
            lines.append(f"| {r['name']} | | | | | | error: {r['error_message']} |")
            continue
        s = r["simulated"]
        lo, hi = s["ci99"]["p99"]
        why = r["verdict"] if r["modelled"] else \
            "not modelled: " + textwrap.shorten(r["not_modelled_reason"], 110)
        lines.append(f"| {r['router']} | {r['load']:.2f} | "
                     f"{_ms(r['predicted']['p99']) if r['modelled'] else '-'} | "
                     f"{s['p99'] * 1e3:.3f} [{lo * 1e3:.3f}, {hi * 1e3:.3f}] | "
                     f"{format(r['error']['p99'], '+.1%') if r['modelled'] else '-'} | "
                     f"{s['mean_batch_size']:.2f} | {why} |")
    return "\n".join(lines) + "\n"


def _lab_section(lab, fig) -> str:
    from .lab import LAB, lab_summary

    if not lab:
        return ""
    lab = sorted(lab, key=lambda p: p["B"])
    wall = lab[0]["wall"]
    s = lab_summary(lab, wall)
    by_b = {p["B"]: p for p in lab}
    jit = f"{LAB['jitter'][0]} jitter cv {LAB['jitter'][1]:g}"
    lines = ["## The dynamic-batching lab, predicted and checked", "",
             "The lab builds a mini-Triton batcher, load-tests it against a one-at-a-time server, "
             "sweeps `max_batch_size` and picks \"the largest batch whose p99 stays under the SLA "
             "wall\". Here each step is computed by the theory (`qmodel.predict`) and checked by "
             "the simulator, side by side.", "",
             f"Assumptions: S(k) = {LAB['base'] * 1e3:g} ms + {LAB['per_item'] * 1e3:g} ms x k "
             f"(Inoue 2021, V100) with {jit}; one instance; max_queue_delay "
             f"{LAB['delay'] * 1e3:g} ms; Poisson arrivals; **SLA wall: p99 <= "
             f"{wall * 1e3:g} ms** (e.g. a 15 ms user-facing SLA minus a 5 ms network budget). "
             f"The sweep drives each B at {lab[0]['load']:.0%} of its own capacity (a load test "
             "that pushes each configuration hard).", "", f"![lab]({fig})", ""]
    naive, pick = by_b.get(1), by_b.get(s["pick"])
    if naive and pick:
        lines += [f"**1. Naive (B = 1) against dynamic batching (B = {pick['B']}, the rule's "
                  "pick below).**", "",
                  "| | naive B = 1 | batched B = " + str(pick["B"]) + " | ratio |",
                  "|---|---:|---:|---:|",
                  f"| max sustainable throughput (capacity, req/s) | {naive['capacity']:,.0f} | "
                  f"{pick['capacity']:,.0f} | {s['capacity_ratio']:.1f}x |"]
        for kind in ("predicted", "simulated"):
            a, b = naive["under_wall"][kind], pick["under_wall"][kind]
            capped = " (scan top)" if pick["under_wall"][f"{kind}_capped"] else ""
            lines.append(f"| max throughput with p99 <= {wall * 1e3:g} ms, {kind} (req/s) | "
                         f"{a:,.0f} | {b:,.0f}{capped} | "
                         f"{(b / a if a > 0 else float('inf')):.1f}x |")
        com_n, com_p = naive.get("common"), pick.get("common")
        if com_n and com_p:
            for q in ("p50", "p99"):
                for kind in ("predicted", "simulated"):
                    lines.append(f"| {q} at {com_n['rate']:,.0f} req/s, {kind} (ms) | "
                                 f"{com_n[q][kind] * 1e3:.2f} | {com_p[q][kind] * 1e3:.2f} | "
                                 f"{com_p[q][kind] / com_n[q][kind]:.2f}x |")
        lines.append("")
    lines += [f"**2. The sweep of max_batch_size** (each B at {lab[0]['load']:.0%} of its "
              "capacity; last columns: the largest throughput whose p99 stays under the wall, "
              "found by scanning the load and bisecting).", "",
              "| B | capacity (req/s) | throughput (req/s) | mean batch (sim) | p50 pred / sim (ms) "
              "| p99 pred / sim [99% CI] (ms) | p99 under wall (pred / sim) | max req/s under wall "
              "(pred / sim) | sim p99 at the predicted max (ms) |",
              "|---:|---:|---:|---:|---|---|---|---|---|"]
    for p in lab:
        w, u = p["sweep"], p.get("under_wall")
        lo, hi = w["p99"]["ci99"]
        under = " / ".join("yes" if w["p99"][k] <= wall else "no"
                           for k in ("predicted", "simulated"))
        if u:
            chk = u["simulated_at_predicted"]
            max_txt = (f"{u['predicted']:,.0f}{'+' if u['predicted_capped'] else ''} / "
                       f"{u['simulated']:,.0f}{'+' if u['simulated_capped'] else ''}")
            chk_txt = "-" if chk is None else (f"{chk['p99'] * 1e3:.2f} [{chk['ci99'][0] * 1e3:.2f}"
                                               f", {chk['ci99'][1] * 1e3:.2f}]")
        else:
            max_txt = chk_txt = "-"
        mark = " **<-**" if p["B"] == s["pick"] else ""
        lines.append(f"| {p['B']}{mark} | {p['capacity']:,.0f} | "
                     f"{w['throughput']['simulated']:,.0f} | "
                     f"{w['mean_batch_size']['simulated']:.2f} | {w['p50']['predicted'] * 1e3:.2f} / "
                     f"{w['p50']['simulated'] * 1e3:.2f} | {w['p99']['predicted'] * 1e3:.2f} / "
                     f"{w['p99']['simulated'] * 1e3:.2f} [{lo * 1e3:.2f}, {hi * 1e3:.2f}] | "
                     f"{under} | {max_txt} | {chk_txt} |")
    if any(p.get("under_wall") and (p["under_wall"]["predicted_capped"]
                                    or p["under_wall"]["simulated_capped"]) for p in lab):
        lines += ["", "(+ : no scanned load up to 96% of capacity broke the wall.)"]
    lines += ["", _rule_text(s, by_b, wall), ""]
    return "\n".join(lines)


def _rule_text(s, by_b, wall) -> str:
    def sizes(bs):
        return " and ".join(str(b) for b in bs)

    text = (f"**3. The rule.** The largest B whose p99 stays under the {wall * 1e3:g} ms wall at "
            f"the sweep's load: **B = {s['pick']}** by theory and simulation together (theory "
            f"alone: {s['pick_predicted']}, simulation alone: {s['pick_simulated']}).")
    top = s.get("highest_throughput")
    if top is not None and top != s["pick"]:
        over = by_b[top]["sweep"]["p99"]["simulated"] > wall
        text += (f" Maximising throughput alone would pick B = {top}"
                 + (", whose p99 breaks the wall." if over else "."))
    if "near_best_predicted" in s:
        p, m = s["near_best_predicted"], s["near_best_simulated"]
        same = p == m
        who = (f"B = {sizes(p)}, by theory and simulation alike" if same else
               f"B = {sizes(p)} by theory and B = {sizes(m)} by simulation")
        text += (f" Searching every load instead, the most throughput under the wall comes from "
                 f"{who} (ties within 2%): a larger B run at a lighter load can still fit, so "
                 "the rule is a safe pick for traffic like the load test's, not the only one.")
    return text


def _rounded(obj):
    """Floats to 7 significant digits: finer than any confidence interval, half the bytes."""
    if isinstance(obj, float):
        return float(f"{obj:.7g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_rounded(v) for v in obj]
    return obj


def _router_counts(routers) -> str:
    if not routers:
        return ""
    v = [r["verdict"] for r in routers]
    return (f" Router comparison: {v.count('pass')} of {len(v) - v.count('not modelled')} "
            f"modelled pass, {v.count('not modelled')} simulated only.")


def write_report(campaign, out) -> Path:
    """Write report.md, results.json and figures/*.png for a campaign; return report.md's path.

    Parameters
    ----------
    campaign : qmodel.campaign.runner.Campaign
    out : str or Path
        Output folder (created).
    """
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    rows, routers = campaign.rows, campaign.routers
    (out / "results.json").write_text(json.dumps(_rounded(
        {"level": campaign.level, "settings": campaign.settings, "rows": rows,
         "routers": routers, "curves": campaign.curves, "lab": campaign.lab}), indent=0))
    written = {}
    written["cdf"] = figs.cdf_overlays(rows, out / "figures" / "cdf_overlays.png")
    written["heatmaps"] = figs.error_heatmaps(rows, out / "figures")
    written["throughput"] = figs.throughput_p99(rows, campaign.curves,
                                                out / "figures" / "throughput_p99.png")
    written["routers"] = figs.router_comparison(routers, out / "figures" / "routers.png")
    written["lab"] = figs.lab_figure(campaign.lab, out / "figures" / "lab.png")

    def rel(p):
        return p.relative_to(out).as_posix()

    verdicts = [r["verdict"] for r in rows]
    st = campaign.settings
    cmd = {"quick": "qmodel validate --quick", "full": "qmodel validate --full"}.get(
        campaign.level, f"qmodel validate --configs {st.get('source', 'FILE')}")
    md = [f"# qmodel validation report ({campaign.level})", "",
          f"Theory (`qmodel.predict`) against simulation (`qmodel.simulate`), configuration by "
          f"configuration. Regenerate with `{cmd} --out {out.as_posix()} --resume` (which "
          f"reuses the results cached in `cache/`; `--fresh` instead of `--resume` recomputes "
          f"them). Written {datetime.date.today().isoformat()} by "
          f"qmodel {st['qmodel']}; {st['requests']:,} simulated requests per configuration, "
          f"seed {st['seed']}, on {st['executor']}; {campaign.wall_seconds:.0f} s wall time "
          f"({campaign.stats.get('computed', 0)} tasks computed, "
          f"{campaign.stats.get('cached', 0)} from the cache; the results took "
          f"{campaign.stats.get('task_seconds', 0):.0f} s of compute in all).", "",
          f"**{verdicts.count('pass')} of {len(rows) - verdicts.count('not modelled')} modelled "
          f"configurations pass; {verdicts.count('fail')} fail; "
          f"{verdicts.count('not modelled')} not modelled (simulated only); "
          f"{verdicts.count('error')} raised an error.**" + _router_counts(routers), "",
          f"Tolerances: {st['tolerance']}. With 99% intervals about 1 in 100 checks of an exact "
          "model falls outside by chance. Errors are relative, predicted / simulated - 1. The "
          "textbook baseline: full batches as the customers of a GI/G/c queue (Kingman for one "
          "instance, Allen-Cunneen otherwise) with an exponential tail, plus the mean time to "
          "fill a batch.", "",
          "## Summary", "", summary_markdown(rows), ""]
    if written["cdf"]:
        md += ["## Latency distributions, theory against simulation", "",
               "Representative configurations: for each model family the one with the median "
               "p99 error, and the worst one. Lines: survival function P(latency > t) on a log "
               "scale (the tail is what the p99 is about); markers: p50, p95, p99 with the "
               "simulator's 99% CI.", "", f"![CDF overlays]({rel(written['cdf'])})", ""]
    if written["heatmaps"]:
        md += ["## Where the models miss: p99 error over load and max_batch_size", "",
               "Signed p99 error (predicted / simulated - 1) per configuration; one panel per "
               "instance count (rows) and max_queue_delay (columns). x marks a failed check; "
               "n/m: not modelled. B = 1 has no delay to wait for, so its D = 0 result is shown "
               "in every column.", ""]
        md += [f"![p99 error heatmap]({rel(p)})" for p in written["heatmaps"]] + [""]
    if written["throughput"]:
        md += ["## Throughput against p99, per max_batch_size", "",
               "One instance. Lines: theory over loads 5% to 97% of capacity; points: "
               "simulation with its 99% CI. A larger batch buys throughput with latency.", "",
               f"![throughput vs p99]({rel(written['throughput'])})", ""]
    if written["routers"]:
        md.append(_routers_section(routers, rel(written["routers"])))
    if written["lab"]:
        md.append(_lab_section(campaign.lab, rel(written["lab"])))
    md += ["## Failures", "", _failures(rows + routers),
           "## Every configuration", "", "<details><summary>" + f"{len(rows)} configurations"
           "</summary>", "", _config_table(rows), "", "</details>", ""]
    path = out / "report.md"
    path.write_text("\n".join(md))
    return path
