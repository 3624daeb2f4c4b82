"""Personalized RewardBench Space: leaderboard, evaluate an allowlisted model, explore pairs, try your own.

A thin gr.Blocks face: the logic lives in `personalized_rewardbench.space_logic` (runs, allowlist, GPU-time
estimates, results store) and `personalized_rewardbench.space_views` (tables and texts). Scores come from the
same scorers and engine as `prbench evaluate`, so a run here writes the CLI's results.json.

Run locally: `python space/app.py` (127.0.0.1, the bundled sample, the offline baselines). Environment
variables are listed in `space_logic`'s docstring; GRADIO_SERVER_PORT picks the port.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path

import spaces  # first: on ZeroGPU it must patch torch before CUDA is touched

APP_DIR = Path(__file__).resolve().parent
try:
    import personalized_rewardbench  # noqa: F401  (bundled beside app.py on the Hub, installed locally)
except ImportError:
    sys.path.insert(0, str(APP_DIR.parent))

import gradio as gr

from personalized_rewardbench import space_views as views
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.schema import SUBSETS
from personalized_rewardbench.space_logic import (
    MAX_ANSWER_CHARS,
    MAX_POST_CHARS,
    MAX_POSTS,
    MAX_PROFILE_K,
    MAX_QUESTION_CHARS,
    SpaceContext,
    SpaceSettings,
)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logging.getLogger("httpx").setLevel(logging.WARNING)
logger = logging.getLogger("prbench.space")

SPACE = SpaceContext(SpaceSettings.from_env(APP_DIR))
SPACE.start()
SOURCE = SPACE.source()
RESULTS = SPACE.results_dir


def visitor_errors(fn):
    """Show a visitor one gr.Error line, never a traceback; unexpected errors are logged here, not shown."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except UserError as error:
            raise gr.Error(str(error), print_exception=False) from None
        except Exception as error:
            logger.exception("%s failed", fn.__name__)
            raise gr.Error(
                f"{fn.__name__.replace('_', ' ')} failed ({type(error).__name__}); it was logged. "
                "Try again, or with fewer pairs or another model.",
                print_exception=False,
            ) from None

    return wrapper


def _reporter(progress):
    if progress is None:
        return None
    return lambda done, total: progress((done, total), desc="scoring pairs", unit="pairs")


# -- GPU work: a no-op decorator off Spaces; on ZeroGPU the requested time is the estimate ---------
@spaces.GPU(duration=lambda config, model_id, seconds, progress=None: seconds)
@visitor_errors
def gpu_run(config, model_id, seconds, progress=None):
    return SPACE.execute(config, model_id, on_progress=_reporter(progress))


@spaces.GPU(duration=lambda model_id, item, seconds: seconds)
@visitor_errors
def gpu_score(model_id, item, seconds):
    return SPACE.score_item(model_id, item)


# -- event handlers ------------------------------------------------------------------------------
@visitor_errors
def leaderboard(type_filter, protocol_filter, show_demo, chart_subset):
    """Benchmark runs, demo-sample runs (kept apart) and the bar chart for one subset."""
    benchmark, demo = views.leaderboard_tables(RESULTS, type_filter, protocol_filter)
    chart = views.chart_frame(RESULTS, chart_subset, type_filter, protocol_filter, include_demo=bool(show_demo))
    return benchmark, demo, chart


def refresh_filters():
    types, protocols = views.filter_choices(RESULTS)
    return gr.Dropdown(choices=types), gr.Dropdown(choices=protocols)


@visitor_errors
def evaluate(model_id, subsets, pairs, profile_k, progress=gr.Progress()):
    """Score an allowlisted model on the chosen pairs (or serve the identical stored run)."""
    progress(0, desc="preparing pairs")
    plan, payload = SPACE.evaluate(
        model_id,
        subsets,
        pairs,
        profile_k,
        gpu_runner=lambda config, model, seconds: gpu_run(config, model, seconds, progress),
        on_progress=_reporter(progress),
    )
    results, records = payload["results"], payload["records"]
    margins, width = views.margin_frame(records)
    return (
        views.summary_markdown(results, payload["reused"], payload["notices"]),
        views.subset_frame(results),
        gr.BarPlot(value=margins, x_bin=width),
        views.worst_pairs_frame(records, plan.data.items),
        results,
    )


@visitor_errors
def try_your_own(model_id, question, posts, answer_a, answer_b):
    """Both scores of a visitor's own pair and which answer the model prefers."""
    result = SPACE.try_pair(model_id, question, posts, answer_a, answer_b, gpu_runner=gpu_score)
    return views.try_markdown(result), result


@visitor_errors
def show_pair(pair_id, profile_k):
    """What a model sees (question, top-k posts), the answer key (for humans only), both answers, stored scores."""
    row, item = SPACE.pair(pair_id, profile_k)
    scores = views.stored_scores_frame(RESULTS, SOURCE, row["id"])
    return views.model_input_markdown(item), views.answer_key_markdown(row), item.chosen, item.rejected, scores


def pair_menu(subset):
    choices = views.pair_choices(SOURCE, subset)
    return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None)


# -- layout --------------------------------------------------------------------------------------
def _intro() -> str:
    data = f"`{SOURCE.spec}`" + (f" ({views.DEMO_NOTE})" if SOURCE.is_demo_sample else f", revision `{SOURCE.revision}`")
    notices = "".join(f"\n\n> {notice}" for notice in SPACE.notices)
    return (
        "# Personalized RewardBench\n"
        "Does a reward model prefer the answer that fits **this** user? Each pair has a real user's question, "
        "their earlier posts, and two answers of similar quality: *chosen* follows what the user wants, "
        "*rejected* does not. A model is right when it scores *chosen* higher (ties are wrong).\n\n"
        f"Data: {data}. Results are stored in {SPACE.store.describe()}." + notices
    )


ALLOWED = list(SPACE.allowlist.models.values())
MODEL_CHOICES = [(model.label, model.id) for model in ALLOWED]
SUBSET_CHOICES = [name for name in SUBSETS if name in SOURCE.rows]
TYPES, PROTOCOLS = views.filter_choices(RESULTS)

with gr.Blocks(title="Personalized RewardBench") as demo:
    gr.Markdown(_intro())
    with gr.Tabs():
        with gr.Tab("Leaderboard"):
            with gr.Row():
                type_filter = gr.Dropdown(TYPES, value=views.ALL, label="Model type", allow_custom_value=True)
                protocol_filter = gr.Dropdown(PROTOCOLS, value=views.ALL, label="Protocol", allow_custom_value=True)
                chart_subset = gr.Radio(views.CHART_SUBSETS, value=views.OVERALL, label="Chart subset")
                show_demo = gr.Checkbox(value=SOURCE.is_demo_sample, label="Show demo-sample runs (not benchmark results)")
                refresh = gr.Button("Refresh", scale=0)
            gr.Markdown("### Benchmark runs\nAccuracy in %, 95 % Wilson interval; click a column header to sort.")
            board = gr.Dataframe(headers=views.LEADERBOARD_COLUMNS, interactive=False, show_search="search", elem_id="leaderboard")
            with gr.Group(visible=SOURCE.is_demo_sample) as demo_group:
                gr.Markdown(f"### Demo-sample runs\n{views.DEMO_NOTE}: never ranked with benchmark runs.")
                demo_board = gr.Dataframe(headers=views.LEADERBOARD_COLUMNS, interactive=False, elem_id="demo-leaderboard")
            chart = gr.BarPlot(x="run", y="accuracy (%)", color="data", y_lim=[0, 100], sort="-y", x_label_angle=-20, label="Accuracy per run")

        with gr.Tab("Evaluate a model"):
            with gr.Row():
                with gr.Column(scale=1):
                    model = gr.Dropdown(MODEL_CHOICES, value=MODEL_CHOICES[0][1], label="Model (allowlisted)")
                    subsets = gr.CheckboxGroup(SUBSET_CHOICES, value=SUBSET_CHOICES, label="Subsets")
                    pairs = gr.Slider(1, SPACE.pair_limit(), value=min(8, SPACE.pair_limit()), step=1, label="Pairs per subset")
                    profile_k = gr.Slider(0, MAX_PROFILE_K, value=0, step=1, label="Profile-k (profile posts added to the question)")
                    run = gr.Button("Run", variant="primary", elem_id="run-button")
                    with gr.Accordion("Allowlisted models", open=False):
                        gr.Dataframe(
                            [[m.id, m.type, m.size_b or "-", m.description] for m in ALLOWED],
                            headers=["model", "type", "size (B)", "description"],
                            interactive=False,
                        )
                with gr.Column(scale=2):
                    summary = gr.Markdown(elem_id="run-summary")
                    per_subset = gr.Dataframe(label="Accuracy per subset", interactive=False)
                    margins = gr.BarPlot(x="margin", y="pairs", y_aggregate="sum", x_bin=1.0, y_lim=[0, None], label="Margins: chosen score − rejected score")
                    worst = gr.Dataframe(label="Pairs the model got most wrong", interactive=False, wrap=True)
                    with gr.Accordion("results.json", open=False):
                        results_json = gr.JSON()

        with gr.Tab("Explore pairs"):
            first_choices = views.pair_choices(SOURCE, SUBSET_CHOICES[0])
            with gr.Row():
                explore_subset = gr.Dropdown(SUBSET_CHOICES, value=SUBSET_CHOICES[0], label="Subset")
                pair_id = gr.Dropdown(first_choices, value=first_choices[0][1], label="Pair")
                explore_k = gr.Slider(0, MAX_PROFILE_K, value=3, step=1, label="Profile-k")
            with gr.Row():
                model_view = gr.Markdown(label="What the model sees")
                with gr.Accordion("Answer key (shown to you, never to a model)", open=True):
                    answer_key = gr.Markdown()
            with gr.Row():
                chosen_text = gr.Textbox(label="Chosen (fits the user)", lines=10, interactive=False)
                rejected_text = gr.Textbox(label="Rejected (violates the user's aspects)", lines=10, interactive=False)
            stored_scores = gr.Dataframe(label="Scores of stored runs on this pair", interactive=False)

        with gr.Tab("Try your own"):
            with gr.Row():
                with gr.Column():
                    try_model = gr.Dropdown(MODEL_CHOICES, value=MODEL_CHOICES[0][1], label="Model (allowlisted)")
                    question = gr.Textbox(label="Question", lines=3, info=f"up to {MAX_QUESTION_CHARS} characters")
                    posts = gr.Textbox(label="Profile posts (optional)", lines=4, info=f"one post per line; up to {MAX_POSTS} posts of {MAX_POST_CHARS} characters")
                with gr.Column():
                    answer_a = gr.Textbox(label="Answer A", lines=6, info=f"up to {MAX_ANSWER_CHARS} characters")
                    answer_b = gr.Textbox(label="Answer B", lines=6, info=f"up to {MAX_ANSWER_CHARS} characters")
            score = gr.Button("Score both answers", variant="primary")
            try_summary = gr.Markdown()
            try_json = gr.JSON(visible=False)

    board_inputs = [type_filter, protocol_filter, show_demo, chart_subset]
    board_outputs = [board, demo_board, chart]
    demo.load(leaderboard, board_inputs, board_outputs, api_name="leaderboard")
    for control in (type_filter, protocol_filter, show_demo, chart_subset):
        control.change(leaderboard, board_inputs, board_outputs, api_visibility="private")
    show_demo.change(lambda shown: gr.Group(visible=shown), show_demo, demo_group, api_visibility="private")
    refresh.click(refresh_filters, None, [type_filter, protocol_filter], api_visibility="private").then(
        leaderboard, board_inputs, board_outputs, api_visibility="private"
    )
    run.click(
        evaluate,
        [model, subsets, pairs, profile_k],
        [summary, per_subset, margins, worst, results_json],
        api_name="evaluate",
        concurrency_id="gpu",
        concurrency_limit=1,
    ).then(refresh_filters, None, [type_filter, protocol_filter], api_visibility="private").then(
        leaderboard, board_inputs, board_outputs, api_visibility="private"
    )
    score.click(try_your_own, [try_model, question, posts, answer_a, answer_b], [try_summary, try_json], api_name="try", concurrency_id="gpu", concurrency_limit=1)
    explore_subset.change(pair_menu, explore_subset, pair_id, api_visibility="private")
    pair_outputs = [model_view, answer_key, chosen_text, rejected_text, stored_scores]
    pair_id.change(show_pair, [pair_id, explore_k], pair_outputs, api_name="pair")
    explore_k.change(show_pair, [pair_id, explore_k], pair_outputs, api_visibility="private")
    demo.load(show_pair, [pair_id, explore_k], pair_outputs, api_visibility="private")

demo.queue(max_size=int(os.environ.get("PRBENCH_QUEUE_SIZE", "20")), default_concurrency_limit=2)

if __name__ == "__main__":
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), show_error=False)
