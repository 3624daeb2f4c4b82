"""Fingerprint `scores.jsonl` of every scorer type on the demo sample, to show a refactor changes no score.

Runs `prbench evaluate` for the classifier RM, both judges in both modes and the three baselines, at
profile-k 0 and 3, on tiny offline models, and writes the sha256 of each run's `scores.jsonl`:

    python scripts/identity_check.py --work /tmp/ident --write before.json
    ... change the code ...
    python scripts/identity_check.py --work /tmp/ident --compare before.json   # exit 1 on any difference

The tiny models are built once into `--work/models` and reused, so both runs score with the same weights.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SCORERS = {
    "classifier": ["--model", "{rm}"],
    "judge-pairwise-logits": ["--model", "{lm}", "--model-type", "judge-pairwise", "--judge-mode", "logits"],
    "judge-pairwise-generate": [
        "--model",
        "{lm}",
        "--model-type",
        "judge-pairwise",
        "--judge-mode",
        "generate",
        "--max-new-tokens",
        "6",
    ],
    "judge-score-logits": ["--model", "{lm}", "--model-type", "judge-score", "--judge-mode", "logits"],
    "judge-score-generate": [
        "--model",
        "{lm}",
        "--model-type",
        "judge-score",
        "--judge-mode",
        "generate",
        "--max-new-tokens",
        "6",
    ],
    "baseline-length": ["--model", "baseline:length"],
    "baseline-random": ["--model", "baseline:random"],
    "baseline-embedding": ["--model", "baseline:embedding"],
}


def build_models(folder: Path) -> dict[str, Path]:
    """The tiny reward model and causal LM, built on first use."""
    rm, lm = folder / "rm", folder / "lm"
    if not (rm / "config.json").exists() or not (lm / "config.json").exists():
        from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model

        build_tiny_reward_model(rm, seed=1)
        build_tiny_causal_lm(lm, seed=2)
    return {"rm": rm, "lm": lm}


def fingerprints(work: Path) -> dict[str, str]:
    """sha256 of scores.jsonl per (scorer, k)."""
    models = build_models(work / "models")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.setdefault("HF_HOME", str(work / "hf-home"))
    digests: dict[str, str] = {}
    for name, args in SCORERS.items():
        for k in (0, 3):
            out = work / "results" / f"{name}-k{k}"
            shutil.rmtree(out, ignore_errors=True)
            argv = [a.format(rm=models["rm"], lm=models["lm"]) for a in args]
            command = [
                sys.executable,
                "-m",
                "personalized_rewardbench",
                "evaluate",
                *argv,
                "--data",
                "sample",
                "--profile-k",
                str(k),
                "--retriever",
                "minilm",
                "--output",
                str(out),
                "--cache-dir",
                str(work / "cache"),
                "--no-progress",
            ]
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{name} k={k} failed:\n{done.stderr[-2000:]}")
            (scores,) = out.rglob("scores.jsonl")
            digests[f"{name}-k{k}"] = hashlib.sha256(scores.read_bytes()).hexdigest()
            print(f"{name}-k{k}: {digests[f'{name}-k{k}'][:16]}", flush=True)
    return digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for models, caches and runs")
    parser.add_argument("--write", type=Path, help="write the fingerprints to this JSON file")
    parser.add_argument("--compare", type=Path, help="compare with fingerprints written earlier")
    args = parser.parse_args()
    digests = fingerprints(args.work)
    if args.write:
        args.write.write_text(json.dumps(digests, indent=2) + "\n")
    if args.compare:
        before = json.loads(args.compare.read_text())
        differ = sorted(key for key in before.keys() | digests.keys() if before.get(key) != digests.get(key))
        print("identical: all" if not differ else f"DIFFERENT: {', '.join(differ)}")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
