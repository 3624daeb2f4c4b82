"""Demo of the personalized_accuracy metric: paste scores (or judge verdicts), get the result.

The callbacks `score_text` and `judge_text` are plain functions; they compute through the metric
module next to this file (loaded with `evaluate.load`), so the demo shows exactly what the metric returns.
"""

import re
import threading
from pathlib import Path
from typing import Any

import evaluate
import gradio as gr

_SCRIPT = Path(__file__).resolve().parent / "personalized_accuracy.py"
_LOCK = threading.Lock()  # one compute at a time per metric instance
_METRICS: dict[str, Any] = {}


def _metric(config_name: str):
    # Load by file path: on a Space the folder is not named after the script.
    if config_name not in _METRICS:
        _METRICS[config_name] = evaluate.load(str(_SCRIPT), config_name, keep_in_memory=True)
    return _METRICS[config_name]


def _tokens(text: str | None) -> list[str]:
    """Split on commas and newlines; blank items are dropped."""
    return [t.strip() for t in re.split(r"[,\r\n]+", text or "") if t.strip()]


def _numbers(text: str | None, label: str, parse) -> list:
    values = []
    for i, token in enumerate(_tokens(text)):
        try:
            values.append(parse(token))
        except ValueError:
            raise gr.Error(f"{label}[{i}] is {token!r}: not a number") from None
    return values


def _subsets(text: str | None) -> list[str] | None:
    names = _tokens(text)
    return names or None


def _compute(config_name: str, **inputs) -> dict[str, Any]:
    try:
        with _LOCK:
            return _metric(config_name).compute(**inputs)
    except ValueError as err:
        raise gr.Error(str(err)) from None


def score_text(chosen_text: str, rejected_text: str, subsets_text: str = "") -> dict[str, Any]:
    """Pointwise scores, comma or newline separated -> the metric's result dict."""
    return _compute(
        "default",
        chosen_scores=_numbers(chosen_text, "chosen_scores", float),
        rejected_scores=_numbers(rejected_text, "rejected_scores", float),
        subsets=_subsets(subsets_text),
    )


def _verdict(token: str):
    value = float(token)
    return int(value) if value.is_integer() else value


def judge_text(predictions_text: str, subsets_text: str = "") -> dict[str, Any]:
    """Pairwise judge verdicts (1 / 0 / -1), comma or newline separated -> the metric's result dict."""
    return _compute(
        "pairwise",
        predictions=_numbers(predictions_text, "predictions", _verdict),
        subsets=_subsets(subsets_text),
    )


with gr.Blocks(title="Personalized Accuracy") as demo:
    gr.Markdown(
        "# Personalized Accuracy\n"
        "Personalized RewardBench (arXiv 2604.07343): how often does a reward model prefer the answer that "
        "fits the user (`chosen`) over the one that violates the user's preferences (`rejected`)? "
        "Ties and missing verdicts count as wrong in `accuracy`, as half in `accuracy_ties_half`; "
        "`ci95_low`/`ci95_high` is the Wilson 95 % interval. Separate values with commas or new lines."
    )
    with gr.Tab("Scores (pointwise)"):
        with gr.Row():
            chosen_box = gr.Textbox(label="chosen scores", lines=6, placeholder="2.5, 0.25, 1.0, -0.5, 3.0")
            rejected_box = gr.Textbox(label="rejected scores", lines=6, placeholder="1.0, 0.75, 1.0, -2.0, 0.5")
            subsets_box = gr.Textbox(
                label="subsets (optional)", lines=6, placeholder="Art, Society, Society, Art, Society"
            )
        score_button = gr.Button("Compute", variant="primary")
        score_output = gr.JSON(label="result")
        score_button.click(score_text, inputs=[chosen_box, rejected_box, subsets_box], outputs=score_output)
    with gr.Tab("Judge verdicts (pairwise)"):
        with gr.Row():
            verdict_box = gr.Textbox(
                label="verdicts: 1 = chose chosen, 0 = chose rejected, -1 = no verdict",
                lines=6,
                placeholder="1, 0, 1, -1, 1",
            )
            judge_subsets_box = gr.Textbox(
                label="subsets (optional)", lines=6, placeholder="Art, Art, Society, Society, Society"
            )
        judge_button = gr.Button("Compute", variant="primary")
        judge_output = gr.JSON(label="result")
        judge_button.click(judge_text, inputs=[verdict_box, judge_subsets_box], outputs=judge_output)


if __name__ == "__main__":
    demo.launch()
