"""`prbench bon curve`: expected judge quality of best-of-k for every scored reward model.

For one item with N judged candidates, best-of-k picks the candidate the reward model scores highest
among k drawn without replacement. Its expected quality over all C(N, k) subsets is exact, not a
sample of the first k: sort the candidates by score; with distinct scores the candidate at rank i
(1 = lowest) is the best of a random k-subset with probability C(i-1, k-1) / C(N, k). Tied scores
are broken uniformly at random, so a tie group g (L candidates score lower, m tie) is the subset's
best with probability (C(L+m, k) - C(L, k)) / C(N, k) and contributes its mean quality (`best_of_k`).
The floor is a random pick (k = 1, the same for every model); the ceiling is the judge's own best
(the oracle: the candidates ranked by their quality). Figures are means over items with a 95 %
normal interval (mean +- 1.96 standard errors over items).

An item with a candidate the judge left unparsable is excluded from every curve (the same item set for
every model and k), and counted in ``items_excluded``.

>>> best_of_k([3.0, 1.0, 2.0], [0.0, 1.0, 2.0], 2)  # best of {3,1}: 0; {3,2}: 0; {1,2}: 2
0.6666666666666666
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from personalized_rewardbench.downstream.bon_scores import load_score_runs
from personalized_rewardbench.downstream.candidates import load_candidates
from personalized_rewardbench.downstream.resumable import RUN_FILE, read_jsonl
from personalized_rewardbench.downstream.rubric_judge import JUDGMENTS, candidate_key
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.runs.score_log import write_json_atomic

ORACLE = "oracle (judge's best)"
RANDOM = "random pick"


def best_of_k(scores: Sequence[float], qualities: Sequence[float], k: int) -> float:
    """Expected quality of the top-scored candidate of a uniformly random k-subset (ties broken at random)."""
    n = len(scores)
    if not 1 <= k <= n or len(qualities) != n:
        raise ValueError(f"k must be in 1..{n} and there must be one quality per score")
    groups: dict[float, list[float]] = {}
    for score, value in zip(scores, qualities):
        groups.setdefault(float(score), []).append(float(value))
    total, below = 0.0, 0
    for score in sorted(groups):
        members = groups[score]
        chance = (math.comb(below + len(members), k) - math.comb(below, k)) / math.comb(n, k)
        total += chance * sum(members) / len(members)
        below += len(members)
    return total


def k_values(n: int) -> list[int]:
    """1, 2, 4, ... up to N, and N itself."""
    ks = [2**p for p in range(n.bit_length()) if 2**p <= n]
    return ks if ks[-1] == n else [*ks, n]


def interval(values: np.ndarray) -> dict[str, float]:
    """Mean and 95 % normal interval over items."""
    mean = float(values.mean())
    half = 1.96 * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return {"mean": mean, "ci95": [mean - half, mean + half]}


@dataclass
class CurveData:
    """Per-item inputs of every curve: item ids, candidate qualities, and each model's candidate scores."""

    item_ids: list[str]
    qualities: list[list[float]]
    scores: dict[str, list[list[float]]]
    identities: dict[str, dict[str, Any]]
    judge: str
    excluded: list[str]
    unparsable: int
    n: int

    def values(self, model: str | None, ks: Sequence[int]) -> np.ndarray:
        """items x ks matrix of best-of-k quality; `model` None is the oracle."""
        rows = self.qualities if model is None else self.scores[model]
        return np.array([[best_of_k(s, q, k) for k in ks] for s, q in zip(rows, self.qualities)])


def judge_folders(candidates: Path) -> list[Path]:
    return sorted(p for p in (Path(candidates) / "judge").glob("*/") if (p / f"{JUDGMENTS}.jsonl").is_file())


def pick_judge(candidates: Path, judge: str | None) -> Path:
    folders = judge_folders(candidates)
    if judge:
        folders = [f for f in folders if judge in (f.name, json.loads((f / RUN_FILE).read_text())["judge"])]
    if not folders:
        raise UserError(
            f"{candidates}: no finished judge run{f' for {judge}' if judge else ''}; run `prbench bon judge`"
        )
    if len(folders) > 1:
        raise UserError(
            f"{candidates}: several judge runs ({', '.join(f.name for f in folders)}); choose one with --judge NAME"
        )
    return folders[0]


def load_curve_data(candidates: Path, judge: str | None = None) -> CurveData:
    """Join candidates, judgments and every finished score run of a candidates folder."""
    _, records = load_candidates(candidates)
    folder = pick_judge(candidates, judge)
    judged = {record["id"]: record["quality"] for record in read_jsonl(folder / f"{JUDGMENTS}.jsonl")}
    runs = load_score_runs(candidates)
    if not runs:
        raise UserError(f"{candidates}: no finished score run; run `prbench bon score --model RM --candidates DIR`")
    n = len(records[0]["candidates"])
    item_ids, qualities, excluded = [], [], []
    scores: dict[str, list[list[float]]] = {name: [] for name in runs}
    by_id = {name: {r["id"]: r["scores"] for r in run_records} for name, (_, run_records) in runs.items()}
    for record in records:
        keys = [candidate_key(record["id"], text) for text in record["candidates"]]
        if any(key not in judged for key in keys):
            raise UserError(f"{folder}: candidates of {record['id']} were not judged; rerun `prbench bon judge`")
        values = [judged[key] for key in keys]
        if any(value is None for value in values):
            excluded.append(record["id"])
            continue
        item_ids.append(record["id"])
        qualities.append(values)
        for name in runs:
            scores[name].append(by_id[name][record["id"]])
    if not item_ids:
        raise UserError(f"{folder}: every item has an unparsable judgment; nothing to plot")
    unparsable = sum(1 for value in judged.values() if value is None)
    identities = {name: identity for name, (identity, _) in runs.items()}
    return CurveData(item_ids, qualities, scores, identities, folder.name, excluded, unparsable, n)


def compute_curves(data: CurveData) -> dict[str, Any]:
    """Every figure of the curves: per model and k the mean best-of-k quality with its interval."""
    ks = k_values(data.n)
    random_pick = interval(np.array([np.mean(q) for q in data.qualities]))

    def curve(model: str | None) -> dict[str, Any]:
        values = data.values(model, ks)
        gain = values[:, -1] - values[:, 0]
        return {"k": {str(k): interval(values[:, j]) for j, k in enumerate(ks)}, "gain_at_n": interval(gain)}

    return {
        "judge": data.judge,
        "n": data.n,
        "k_values": ks,
        "items": len(data.item_ids),
        "items_excluded": len(data.excluded),
        "unparsable_judgments": data.unparsable,
        RANDOM: random_pick,
        ORACLE: curve(None),
        "models": {name: {**curve(name), "model_type": data.identities[name]["model_type"]} for name in data.scores},
    }


def write_curve_png(curves: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = curves["k_values"]
    figure, axis = plt.subplots(figsize=(7, 4.5))
    series = [(name, figures["k"], "-o") for name, figures in curves["models"].items()]
    series.append((ORACLE, curves[ORACLE]["k"], "--"))
    for name, per_k, style in series:
        means = [per_k[str(k)]["mean"] for k in ks]
        low = [per_k[str(k)]["ci95"][0] for k in ks]
        high = [per_k[str(k)]["ci95"][1] for k in ks]
        axis.plot(ks, means, style, label=name)
        axis.fill_between(ks, low, high, alpha=0.15)
    axis.axhline(curves[RANDOM]["mean"], color="grey", linestyle=":", label=RANDOM)
    axis.set_xscale("log", base=2)
    axis.set_xticks(ks, [str(k) for k in ks])
    axis.set_xlabel("k (candidates the reward model chooses from)")
    axis.set_ylabel("judge quality (mean rubric rating, 0-2)")
    axis.set_title(f"Best-of-k over {curves['items']} items (judge: {curves['judge']})")
    axis.legend(fontsize=8)
    figure.tight_layout()
    return save_figure(figure, path)


def save_figure(figure, path: Path) -> Path:
    """Write a matplotlib figure to `path` (PNG, 120 dpi) through a temporary file, then close it."""
    import matplotlib.pyplot as plt

    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=120)
    plt.close(figure)
    temporary.replace(path)
    return path


def write_curves(candidates: Path, judge: str | None = None) -> tuple[dict[str, Any], Path, Path]:
    """Compute the curves of a candidates folder; write `curves.json` and `curves.png` beside its candidates."""
    curves = compute_curves(load_curve_data(candidates, judge))
    json_path, png_path = Path(candidates) / "curves.json", Path(candidates) / "curves.png"
    write_json_atomic(json_path, curves)
    write_curve_png(curves, png_path)
    return curves, json_path, png_path
