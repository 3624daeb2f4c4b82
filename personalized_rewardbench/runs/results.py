"""results.json: where a run lives on disk, what it records, and how it is read back."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

from personalized_rewardbench import __version__
from personalized_rewardbench.accuracy import pointwise_accuracy
from personalized_rewardbench.runs.run_files import BENCHMARK, RESULTS_FILE, SCORES_FILE, RunFileError, read_results

__all__ = ["BENCHMARK", "RESULTS_FILE", "SCORES_FILE", "build_results", "find_results", "format_table", "summarize"]


def slug(text: str) -> str:
    """Filesystem-safe name: `Org/Model-1.5B` -> `Org__Model-1.5B`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.replace("/", "__")).strip("._") or "model"


def data_slug(spec: str) -> str:
    if spec == "sample":
        return "sample"
    if spec.startswith("hub:"):
        return slug(spec.removeprefix("hub:").split("/")[-1])
    return slug(Path(spec).name)


def run_slug(
    data: str,
    subsets: list[str] | None,
    limit: int | None,
    profile_k: int,
    retriever: str,
    template: str,
    extra: str = "",
) -> str:
    """Readable part of a run folder name, from data, subset and protocol, e.g. `sample-all-k10-minilm-default`.

    The engine appends a short hash of the full run identity (revisions and protocol)."""
    subset_part = "all" if not subsets else "+".join(sorted(s.split("_")[0] for s in subsets))
    parts = [data_slug(data), subset_part, f"k{profile_k}", retriever if profile_k else "noprofile", template]
    if limit:
        parts.append(f"limit{limit}")
    if extra:
        parts.append(extra)
    return "-".join(parts)


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy figures of scored pairs (in dataset order), computed by the metric module."""
    metrics = pointwise_accuracy(
        [r["chosen_score"] for r in records], [r["rejected_score"] for r in records], [r["subset"] for r in records]
    )
    return {
        "accuracy": metrics["accuracy"],
        "accuracy_ties_half": metrics["accuracy_ties_half"],
        "macro_accuracy": metrics["macro_accuracy"],
        "ci95": [metrics["ci95_low"], metrics["ci95_high"]],
        "num_pairs": metrics["num_pairs"],
        "ties": metrics["num_ties"],
        "mean_margin": metrics["mean_margin"],
        "per_subset": {
            name: {
                "accuracy": figures["accuracy"],
                "num_pairs": figures["num_pairs"],
                "ties": figures["num_ties"],
                "ci95": [figures["ci95_low"], figures["ci95_high"]],
            }
            for name, figures in metrics["per_subset"].items()
        },
        "truncated_pairs": sum(1 for r in records if r.get("truncated")),
    }


def build_results(
    *, run: dict[str, Any], records: list[dict[str, Any]], extra_metrics: dict[str, Any], runtime: dict[str, Any]
) -> dict[str, Any]:
    """The results.json payload: run identity (from run.json), figures, runtime."""
    return {
        "benchmark": BENCHMARK,
        **run,
        **summarize(records),
        **extra_metrics,
        "runtime": runtime,
        "package_version": __version__,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def find_results(folder: Path, notices: list[str] | None = None) -> list[dict[str, Any]]:
    """Every valid results.json under `folder` (with its path under the key `path`), newest first.

    A damaged or foreign results.json is skipped; its one-line reason (naming the file) goes to `notices`."""
    found = []
    for path in sorted(folder.rglob(RESULTS_FILE)):
        try:
            payload = read_results(path)
        except RunFileError as error:
            if notices is not None:
                notices.append(f"skipped {error}")
            continue
        found.append({**payload, "path": str(path)})
    return sorted(found, key=lambda r: r.get("created_at", ""), reverse=True)


def format_table(results: dict[str, Any]) -> str:
    """Per-subset console table with the overall row. Pairwise judges (results with `num_verdicts`)
    show pairs, verdicts (two per pair) and verdicts without a decision instead of ties."""
    if "num_verdicts" in results:
        return _format_judge_table(results)
    lines = [f"{'subset':<36} {'pairs':>6} {'ties':>5} {'accuracy':>9}  95% interval"]
    rows = [(name, figures) for name, figures in results["per_subset"].items()]
    rows.append(
        (
            "overall (micro)",
            {
                "num_pairs": results["num_pairs"],
                "ties": results["ties"],
                "accuracy": results["accuracy"],
                "ci95": results["ci95"],
            },
        )
    )
    for name, figures in rows:
        low, high = figures["ci95"]
        lines.append(
            f"{name:<36} {figures['num_pairs']:>6} {figures['ties']:>5} {100 * figures['accuracy']:>8.2f}%  "
            f"[{100 * low:.2f}, {100 * high:.2f}]"
        )
    lines.append(f"{'macro (mean over subsets)':<36} {'':>6} {'':>5} {100 * results['macro_accuracy']:>8.2f}%")
    return "\n".join(lines)


def _format_judge_table(results: dict[str, Any]) -> str:
    lines = [f"{'subset':<36} {'pairs':>6} {'verdicts':>8} {'no verdict':>10} {'accuracy':>9}  95% interval (per pair)"]
    rows = [(name, figures) for name, figures in results["per_subset"].items()]
    rows.append(("overall (micro)", results))
    for name, figures in rows:
        low, high = figures["ci95"]
        no_verdict = figures.get("no_verdict", figures["ties"])
        lines.append(
            f"{name:<36} {figures['num_pairs']:>6} {figures['num_verdicts']:>8} {no_verdict:>10} "
            f"{100 * figures['accuracy']:>8.2f}%  [{100 * low:.2f}, {100 * high:.2f}]"
        )
    lines.append(f"{'macro (mean over subsets)':<36} {'':>6} {'':>8} {'':>10} {100 * results['macro_accuracy']:>8.2f}%")
    return "\n".join(lines)
