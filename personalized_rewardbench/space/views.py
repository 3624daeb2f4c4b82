"""Texts and tables the Space shows for one run and for try-your-own.

Reward models (and the rating judge) give each answer a score: the margin is chosen − rejected and
a pair is right when it is positive. A pairwise judge gives a verdict per answer order instead
(chosen shown first, then second; record fields ``verdict_chosen_first`` / ``_second``, margins in
favour of chosen ``margin_chosen_first`` / ``_second``): its views show both verdicts and count the
orders it got right, and its accuracy is over 2N verdicts. Plain pandas DataFrames and Markdown;
nothing here imports gradio, so each view is testable alone. Percentages are numbers rounded to 2 decimals.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.runs.leaderboard import SHORT, coverage, protocol_label

ALL = "all"
HUB_URL = "https://huggingface.co"  # where model, dataset and Space links point
OVERALL = "overall"
DEMO_NOTE = "demo sample (written for this package): not benchmark data, not benchmark results"
ORDERS = (("first", "chosen shown first"), ("second", "chosen shown second"))
_VERDICT = {1: "chosen", 0: "rejected", -1: "no verdict"}


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&])")


def plain(text: str) -> str:
    """`text` escaped for Markdown: HTML tags, links, images and emphasis are shown as the characters they are.

    >>> print(plain("<img src=x onerror=alert(1)> ![a](http://x)"))
    \\<img src=x onerror=alert\\(1\\)\\> \\!\\[a\\]\\(http://x\\)
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 2)


def interval(low: float, high: float) -> str:
    return f"[{100 * low:.2f}, {100 * high:.2f}]"


def public_dataset(spec: str | None) -> str:
    """How the Space names a data source: Hub ids and the sample as they are, a local folder by its name only."""
    spec = spec or ""
    if spec == "sample" or spec.startswith("hub:"):
        return spec
    return f"local folder {Path(spec).name}"


def public_results(results: dict[str, Any]) -> dict[str, Any]:
    """results.json as the visitor sees it: the data source named without a server path."""
    return {**results, "dataset": public_dataset(results.get("dataset"))}


# -- pairwise-judge records -----------------------------------------------------------------------
def is_pairwise(record: dict[str, Any]) -> bool:
    """True for a pairwise judge's record (a verdict per answer order rather than two scores)."""
    return "verdict_chosen_first" in record


def orders_right(record: dict[str, Any]) -> int:
    """In how many of the two answer orders the judge preferred chosen."""
    return sum(1 for order, _ in ORDERS if record.get(f"verdict_chosen_{order}") == 1)


def verdict_text(record: dict[str, Any], order: str) -> str:
    """'chosen (+1.23)', 'rejected (-0.40)' or 'no verdict' for one answer order (margin only in logits mode)."""
    text = _VERDICT.get(record.get(f"verdict_chosen_{order}"), "no verdict")
    margin = record.get(f"margin_chosen_{order}")
    return text if margin is None or text == "no verdict" else f"{text} ({margin:+.2f})"


def _margin(record: dict[str, Any]) -> float:
    return float(record["chosen_score"]) - float(record["rejected_score"])


# -- one run --------------------------------------------------------------------------------------
def _interval_note(results: dict[str, Any]) -> str:
    """Which unit the 95 % interval is computed over (judge runs say so in results.json when it is pairs)."""
    unit = results.get("ci95_unit")
    if unit:
        return f" (at the {str(unit).rstrip('s')} level)"
    if results.get("num_verdicts"):
        return f" (treating the {results['num_verdicts']} verdicts as independent)"
    return ""


def _judge_lines(results: dict[str, Any]) -> list[str]:
    verdicts = results["num_verdicts"]
    lines = [
        f"### {results['model']} ({results['model_type']}): **{100 * results['accuracy']:.2f} %** accuracy "
        f"over {verdicts} verdicts",
        f"{results['num_pairs']} pairs, each judged twice (chosen shown first, then second). 95 % interval "
        f"{interval(*results['ci95'])}{_interval_note(results)}; "
        f"no verdict: {results.get('no_verdict', results.get('ties', 0))} of {verdicts}; "
        f"protocol {protocol_label(results)}; data {public_dataset(results.get('dataset'))}.",
    ]
    parts = []
    if "consistent_accuracy" in results:
        parts.append(f"right in both orders on {100 * results['consistent_accuracy']:.2f} % of pairs")
    if "accuracy_chosen_first" in results and "accuracy_chosen_second" in results:
        parts.append(
            f"right on {100 * results['accuracy_chosen_first']:.2f} % with chosen shown first and "
            f"{100 * results['accuracy_chosen_second']:.2f} % with chosen shown second"
        )
    if "position_bias" in results:
        parts.append(f"position bias {100 * results['position_bias']:+.2f} points")
    if parts:
        lines.append("Judge: " + "; ".join(parts) + ".")
    return lines


def summary_markdown(results: dict[str, Any], reused: bool, notices: list[str]) -> str:
    if results.get("num_verdicts"):
        lines = _judge_lines(results)
    else:
        lines = [
            f"### {results['model']} ({results['model_type']}): **{100 * results['accuracy']:.2f} %** accuracy",
            f"95 % interval {interval(*results['ci95'])} over {results['num_pairs']} pairs "
            f"(ties: {results['ties']}); protocol {protocol_label(results)}; "
            f"data {public_dataset(results.get('dataset'))}.",
        ]
        if "no_verdict" in results:
            lines.append(
                f"Judge: answers without a rating: {results['no_verdict']} (their pairs count as ties: wrong)."
            )
    if reused:
        lines.append(
            "An identical finished run was found in the store: these are its stored results (nothing was recomputed)."
        )
    if results.get("demo_sample"):
        lines.append(f"Note: {DEMO_NOTE}.")
    else:
        full, covered = coverage(results)
        if not full:
            lines.append(
                f"Partial run ({covered}): listed with the partial runs, never ranked with full benchmark runs."
            )
    if results.get("truncated_pairs"):
        lines.append(f"Truncated pairs (lowest-ranked posts dropped to fit): {results['truncated_pairs']}.")
    lines += [f"Note: {notice}" for notice in notices]
    return "\n\n".join(lines)


def subset_frame(results: dict[str, Any]) -> pd.DataFrame:
    """Per-subset accuracy with its interval, then the overall (micro) and macro rows.

    Judge runs add the number of verdicts (2 per pair) and call their ties what they are: no verdict."""
    judge = bool(results.get("num_verdicts"))
    ties = "no verdict" if judge else "ties"
    columns = ["subset", "pairs", *(["verdicts"] if judge else []), ties, "accuracy (%)", "95% CI"]

    def row(name: str, figures: dict[str, Any], accuracy: float, ci: str) -> dict[str, Any]:
        extra = {"verdicts": figures.get("num_verdicts", 2 * figures["num_pairs"])} if judge else {}
        missing = figures.get("ties", figures.get("no_verdict", 0))
        return {
            "subset": name,
            "pairs": figures["num_pairs"],
            **extra,
            ties: missing,
            "accuracy (%)": pct(accuracy),
            "95% CI": ci,
        }

    rows = [row(name, f, f["accuracy"], interval(*f["ci95"])) for name, f in results["per_subset"].items()]
    rows.append(row("overall (micro)", results, results["accuracy"], interval(*results["ci95"])))
    rows.append(row("macro (mean over subsets)", results, results["macro_accuracy"], ""))
    return pd.DataFrame(rows, columns=columns)


def margin_frame(records: list[dict[str, Any]], bins: int = 20) -> tuple[pd.DataFrame, float, str]:
    """One row per margin (pairs = 1), a readable bin width and the chart's label.

    Scores: chosen − rejected per pair. Pairwise judges: the margin of each answer order, when the
    judge reads verdicts from logits (generate mode has none)."""
    if records and is_pairwise(records[0]):
        margins = [
            r[f"margin_chosen_{order}"]
            for r in records
            for order, _ in ORDERS
            if r.get(f"margin_chosen_{order}") is not None
        ]
        label = (
            "Judge margins, both answer orders: log P(chosen's letter) − log P(rejected's letter)"
            if margins
            else "No margins: this judge states its verdicts in text"
        )
    else:
        margins = [_margin(r) for r in records]
        label = "Margins: chosen score − rejected score"
    spread = (max(margins) - min(margins)) if margins else 0.0
    width = spread / bins if spread > 0 else 1.0
    width = float(f"{width:.2g}")  # a readable bin width
    return pd.DataFrame({"margin": margins, "pairs": [1] * len(margins)}), width, label


def margin_counts(margins: list[float], bins: int = 20) -> tuple[list[float], list[int]]:
    """Histogram of `margins`: (bin edges, pairs per bin). Equal values (or one value) give one bin around them.

    >>> margin_counts([82.0, -50.0], bins=4)
    ([-50.0, -17.0, 16.0, 49.0, 82.0], [1, 0, 0, 1])
    """
    import numpy as np

    if not margins:
        return [], []
    low, high = min(margins), max(margins)
    if high == low:
        half = max(abs(low) * 0.05, 0.5)
        return [low - half, high + half], [len(margins)]
    counts, edges = np.histogram(margins, bins=bins, range=(low, high))
    return [float(edge) for edge in edges], [int(n) for n in counts]


def margin_figure(records: list[dict[str, Any]]):
    """The margin histogram as a matplotlib Figure: whole-number pair counts, a line at 0 (right of it: correct)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    frame, _width, label = margin_frame(records)
    edges, counts = margin_counts(list(frame["margin"]))
    figure = Figure(figsize=(7.5, 2.8), layout="constrained")
    axis = figure.add_subplot()
    if not counts:
        axis.text(0.5, 0.5, label, ha="center", va="center")
        axis.set_axis_off()
        return figure
    widths = [right - left for left, right in zip(edges, edges[1:])]
    colours = [
        "#54a24b" if left >= 0 else "#e45756" if right <= 0 else "#bab0ac" for left, right in zip(edges, edges[1:])
    ]
    axis.bar(edges[:-1], counts, width=widths, align="edge", color=colours, edgecolor="white")
    axis.axvline(0, color="black", linewidth=1)
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_ylabel("pairs" if "Judge" not in label else "verdicts")
    axis.set_xlabel(label + " (right of 0: correct)", fontsize=8)
    return figure


def _cut(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _texts(item: EvalItem | None) -> dict[str, str]:
    return {key: _cut(getattr(item, key)) if item else "" for key in ("question", "chosen", "rejected")}


def worst_pairs_frame(records: list[dict[str, Any]], items: list[EvalItem], count: int = 10) -> pd.DataFrame:
    """The pairs the model got wrong, most wrong first.

    Scores: lowest margin first. Pairwise judges: pairs wrong in an order, fewest orders right first,
    then by the summed margins; each order's verdict is shown."""
    by_id = {item.id: item for item in items}
    if records and is_pairwise(records[0]):
        wrong = sorted(
            (r for r in records if orders_right(r) < 2),
            key=lambda r: (orders_right(r), sum(r.get(f"margin_chosen_{o}") or 0.0 for o, _ in ORDERS)),
        )
        columns = ["id", "subset", *(title for _, title in ORDERS), "orders right", "question", "chosen", "rejected"]
        rows = [
            {
                "id": r["id"],
                "subset": SHORT.get(r["subset"], r["subset"]),
                **{title: verdict_text(r, o) for o, title in ORDERS},
                "orders right": f"{orders_right(r)} of 2",
                **_texts(by_id.get(r["id"])),
            }
            for r in wrong[:count]
        ]
        return pd.DataFrame(rows, columns=columns)
    wrong = sorted((r for r in records if _margin(r) <= 0), key=_margin)
    rows = [
        {
            "id": r["id"],
            "subset": SHORT.get(r["subset"], r["subset"]),
            "margin": round(_margin(r), 4),
            **_texts(by_id.get(r["id"])),
        }
        for r in wrong[:count]
    ]
    return pd.DataFrame(rows, columns=["id", "subset", "margin", "question", "chosen", "rejected"])


# -- try your own ---------------------------------------------------------------------------------
def try_markdown(result: dict[str, Any]) -> str:
    """Both scores of a try-your-own pair and the model's preference; a pairwise judge's verdict per order."""
    if "orders" in result:
        headline = {
            "A": "prefers answer **A** in both answer orders",
            "B": "prefers answer **B** in both answer orders",
            "split": "gives no consistent verdict: its preference changes with the answer order",
            "no verdict": "gave no verdict in either answer order",
        }[result["preferred"]]
        table = ["| order | prefers | margin in favour of A |", "| --- | --- | --- |"]
        for order in result["orders"]:
            margin = "-" if order["margin_for_a"] is None else f"{order['margin_for_a']:+.4f}"
            table.append(f"| {order['order']} | {order['prefers'] or 'no verdict'} | {margin} |")
        lines = [f"### {result['model']} {headline}", "\n".join(table)]
    else:
        preferred = "neither (a tie)" if result["preferred"] == "tie" else f"answer **{result['preferred']}**"
        lines = [
            f"### {result['model']} prefers {preferred}",
            f"Answer A: {result['score_a']:.4f}  \nAnswer B: {result['score_b']:.4f}",
        ]
    if result.get("truncated"):
        lines.append("The input was too long for the model: the last profile posts were left out.")
    return "\n\n".join(lines)
