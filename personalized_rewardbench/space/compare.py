"""The Space's Compare tab: two stored runs on the same pairs, side by side, with McNemar's exact test.

A run is named by its folder relative to the results folder (no server path). The comparison is
over the units both runs scored (`significance`): per subset and overall, each run's accuracy, the
difference with its 95 % interval, McNemar's p, how often the two agree, and the pairs where they
disagree (each one opens in Explore). When the two runs are one model at profile-k 0 and k > 0,
the difference is that model's profile gain. Plain pandas and Markdown; nothing here imports gradio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from personalized_rewardbench.data.sources import Source
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.leaderboard import SHORT, coverage, protocol_label
from personalized_rewardbench.runs.results import find_results
from personalized_rewardbench.runs.significance import align, paired_test, run_outcomes
from personalized_rewardbench.space.board import model_name
from personalized_rewardbench.space.views import interval, pct

DISAGREEMENT_COLUMNS = ["id", "subset", "order", "right", "question"]
SUBSET_COLUMNS = ["subset", "pairs", "A (%)", "B (%)", "A − B (points)", "95% CI", "McNemar p", "agree (%)"]
MAX_DISAGREEMENTS = 200


def _key(folder: Path, results: dict[str, Any]) -> str:
    return str(Path(results["path"]).parent.relative_to(folder))


def run_label(results: dict[str, Any]) -> str:
    """A run as the menus show it: model, protocol, coverage, data kind and time."""
    data = "demo sample" if results.get("demo_sample") else "benchmark data"
    when = results.get("created_at", "")[:16].replace("T", " ")
    return f"{model_name(results['model'])} | {protocol_label(results)} | {coverage(results)[1]} | {data} | {when}"


def run_choices(folder: Path) -> list[tuple[str, str]]:
    """(label, key) of every stored run whose per-pair scores can be read, newest first."""
    return [
        (run_label(results), _key(folder, results))
        for results in find_results(folder)
        if run_outcomes(results["path"]) is not None
    ]


def default_pair(folder: Path) -> tuple[str | None, str | None]:
    """Two runs to compare first: the newest run and the newest other run on exactly its pairs (if any)."""
    found = [r for r in find_results(folder) if run_outcomes(r["path"]) is not None]
    if not found:
        return None, None
    first = found[0]
    a = run_outcomes(first["path"])
    for other in found[1:]:
        left, right = align(a, run_outcomes(other["path"]))
        if left.keys() == right.keys():
            return _key(folder, first), _key(folder, other)
    return _key(folder, first), (_key(folder, found[1]) if len(found) > 1 else None)


def _load(folder: Path, key: str | None, which: str) -> dict[str, Any]:
    for results in find_results(folder):
        if key and _key(folder, results) == key:
            return results
    raise UserError(f"choose run {which} from the menu (no stored run {str(key)[:80]!r})")


def _is_profile_pair(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keep = ("model", "model_revision", "model_type", "dataset_revision")
    same = all(a.get(key) == b.get(key) for key in keep)
    k_a, k_b = (r.get("protocol", {}).get("profile_k", 0) for r in (a, b))
    return same and k_a != k_b and 0 in (k_a, k_b)


def compare_runs(folder: Path, source: Source | None, key_a: str | None, key_b: str | None) -> dict[str, Any]:
    """Everything the Compare tab shows: summary Markdown, per-subset table, disagreements table."""
    a, b = _load(folder, key_a, "A"), _load(folder, key_b, "B")
    if key_a == key_b:
        raise UserError("runs A and B are the same run: choose two different runs")
    outcomes_a, outcomes_b = align(run_outcomes(a["path"]) or {}, run_outcomes(b["path"]) or {})
    overall = paired_test(outcomes_a, outcomes_b)
    if overall is None:
        raise UserError("these two runs share no pairs: choose two runs on the same data and subsets")
    questions = {}
    if source is not None and a.get("dataset_revision") == source.revision:
        questions = {row["id"]: row["question"] for rows in source.rows.values() for row in rows}

    subsets = sorted({outcomes_a[u][0] for u in outcomes_a if u in outcomes_b}, key=lambda s: list(SHORT).index(s))
    rows = []
    for name, subset in [(SHORT.get(s, s), s) for s in subsets] + [("overall", None)]:
        test = overall if subset is None else paired_test(outcomes_a, outcomes_b, subset)
        shared = [u for u in outcomes_a if u in outcomes_b and (subset is None or outcomes_a[u][0] == subset)]
        acc_a = sum(outcomes_a[u][1] for u in shared) / len(shared)
        acc_b = sum(outcomes_b[u][1] for u in shared) / len(shared)
        rows.append(
            {
                "subset": name,
                "pairs": len(shared),
                "A (%)": pct(acc_a),
                "B (%)": pct(acc_b),
                "A − B (points)": round(100 * test.difference, 2),
                "95% CI": interval(*test.ci95),
                "McNemar p": round(test.p_value, 4),
                "agree (%)": pct(test.agreement),
            }
        )
    disagreements = []
    for unit in outcomes_a:
        if unit in outcomes_b and outcomes_a[unit][1] != outcomes_b[unit][1]:
            pair_id, _, order = unit.partition("#")
            disagreements.append(
                {
                    "id": pair_id,
                    "subset": SHORT.get(outcomes_a[unit][0], outcomes_a[unit][0]),
                    "order": f"chosen shown {order}" if order else "",
                    "right": "A" if outcomes_a[unit][1] else "B",
                    "question": " ".join(questions.get(pair_id, "").split())[:140],
                }
            )
    shown = disagreements[:MAX_DISAGREEMENTS]
    unit = "verdicts (pair × answer order)" if any("#" in u for u in outcomes_a) else "pairs"
    verdict = "differ significantly" if overall.significant else "do not differ significantly"
    lines = [
        f"**A**: {run_label(a)}  \n**B**: {run_label(b)}",
        f"On the {overall.units} {unit} both scored, A − B = **{100 * overall.difference:+.2f} points** "
        f"(95 % interval {interval(*overall.ci95)}); McNemar's exact test p = **{overall.p_value:.4g}**: "
        f"the two runs {verdict} at the 5 % level.",
        f"They agree on {pct(overall.agreement)} % of the {unit}; A alone is right on {overall.a_only}, "
        f"B alone on {overall.b_only}.",
    ]
    if _is_profile_pair(a, b):
        k_a = a.get("protocol", {}).get("profile_k", 0)
        gain = overall.difference if k_a else -overall.difference
        lines.append(
            f"Profile gain of {model_name(a['model'])}: **{100 * gain:+.2f} points** with profile posts than without "
            f"(p = {overall.p_value:.4g})."
        )
    if any("#" in u for u in outcomes_a):
        lines.append(
            "A pairwise judge is compared per answer order; a scoring model's pair counts once per order. "
            "The two orders of a pair are not independent, so p is slightly optimistic."
        )
    if len(disagreements) > len(shown):
        lines.append(f"The first {len(shown)} of {len(disagreements)} disagreements are listed.")
    return {
        "summary": "\n\n".join(lines),
        "subsets": pd.DataFrame(rows, columns=SUBSET_COLUMNS),
        "disagreements": pd.DataFrame(shown, columns=DISAGREEMENT_COLUMNS).drop(
            columns=[] if any(row["order"] for row in shown) else ["order"]
        ),
        "test": overall,
    }
