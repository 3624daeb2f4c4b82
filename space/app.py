"""Personalized RewardBench Space: leaderboard, evaluate an allowlisted model, explore pairs, try your own.

A thin gr.Blocks face: the state lives in `personalized_rewardbench.space.context.SpaceContext` (settings,
allowlist, results store, data, scorers; runs and try-your-own services), the tables and texts in
`space_board` (leaderboard), `space_views` (one run, try your own) and `space_pairs` (explore). Scores
come from the same scorers and engine as `prbench evaluate`, so a run here writes the CLI's results.json.

Run locally: `python space/app.py` (127.0.0.1, the bundled sample, the offline baselines). Environment
variables are listed in `space_settings`'s docstring; GRADIO_SERVER_PORT picks the port. A configuration
error (unreadable allowlist, unreachable data) ends start-up with one line on stderr and exit status 2.
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

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.space import board as board_views
from personalized_rewardbench.space import pairs as pair_views
from personalized_rewardbench.space import views as views
from personalized_rewardbench.space.context import SpaceContext
from personalized_rewardbench.space.errors import public_message
from personalized_rewardbench.space.settings import (
    MAX_ANSWER_CHARS,
    MAX_POST_CHARS,
    MAX_POSTS,
    MAX_PROFILE_K,
    MAX_QUESTION_CHARS,
    SpaceSettings,
)

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logging.getLogger("httpx").setLevel(logging.WARNING)
logger = logging.getLogger("prbench.space")

try:
    SPACE = SpaceContext(SpaceSettings.from_env(APP_DIR))
    SPACE.start()
except UserError as error:  # a configuration mistake: one line for the operator, no traceback
    print(error.render("space/app.py"), file=sys.stderr)
    sys.exit(2)
SOURCE = SPACE.source()
RESULTS = SPACE.results_dir


def visitor_errors(fn):
    """Show a visitor one gr.Error line (no traceback, server path or CLI advice); unexpected errors are only logged."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except gr.Error:
            raise
        except UserError as error:
            raise gr.Error(public_message(error), print_exception=False) from None
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
# The items arrive prepared (data loaded, profiles ranked in the main process): the GPU time is scoring only.
@spaces.GPU(duration=lambda config, model_id, prepared, seconds, progress=None: seconds)
@visitor_errors
def gpu_run(config, model_id, prepared, seconds, progress=None):
    return SPACE.runs.execute(config, model_id, prepared, on_progress=_reporter(progress))


@spaces.GPU(duration=lambda model_id, item, seconds: seconds)
@visitor_errors
def gpu_score(model_id, item, seconds):
    return SPACE.tries.score_item(model_id, item)


# -- event handlers ------------------------------------------------------------------------------
@visitor_errors
def leaderboard(type_filter, protocol_filter, chart_section, chart_subset):
    """Full benchmark runs (ranked), partial runs, demo-sample runs, and the bar chart of one section."""
    benchmark, partial, demo_runs = board_views.leaderboard_tables(RESULTS, type_filter, protocol_filter)
    chart = board_views.chart_frame(RESULTS, chart_subset, type_filter, protocol_filter, chart_section)
    return benchmark, partial, demo_runs, chart


def refresh_filters():
    types, protocols = board_views.filter_choices(RESULTS)
    return gr.Dropdown(choices=types), gr.Dropdown(choices=protocols)


@visitor_errors
def refresh_store():
    """Pull runs added to the Hub results dataset since the last pull (at most once a minute)."""
    notice = SPACE.refresh()
    if notice:
        gr.Warning(public_message(notice))


@visitor_errors
def evaluate(model_id, subsets, pairs, profile_k, progress=gr.Progress()):
    """Score an allowlisted model on the chosen pairs (or serve the identical stored run)."""
    progress(0, desc="preparing pairs")
    plan, payload = SPACE.runs.evaluate(
        model_id,
        subsets,
        pairs,
        profile_k,
        gpu_runner=lambda config, model, prepared, seconds: gpu_run(config, model, prepared, seconds, progress),
        on_progress=_reporter(progress),
    )
    results, records = payload["results"], payload["records"]
    margins, width, margin_label = views.margin_frame(records)
    return (
        views.summary_markdown(results, payload["reused"], [public_message(notice) for notice in payload["notices"]]),
        views.subset_frame(results),
        gr.BarPlot(value=margins, x_bin=width, label=margin_label),
        views.worst_pairs_frame(records, plan.data.items),
        views.public_results(results),
    )


@visitor_errors
def try_your_own(model_id, question, posts, answer_a, answer_b):
    """Both scores of a visitor's own pair and which answer the model prefers."""
    result = SPACE.tries.try_pair(model_id, question, posts, answer_a, answer_b, gpu_runner=gpu_score)
    return views.try_markdown(result), result


@visitor_errors
def show_pair(pair_id, profile_k):
    """What a model sees (question, top-k posts), the answer key (for humans only), both answers, stored scores."""
    row, item = SPACE.data.pair(pair_id, profile_k)
    scores = pair_views.stored_scores_frame(RESULTS, SOURCE, row["id"])
    return (
        pair_views.model_input_markdown(item),
        pair_views.answer_key_markdown(row),
        item.chosen,
        item.rejected,
        scores,
    )


def pair_menu(subset):
    choices = pair_views.pair_choices(SOURCE, subset)
    return gr.Dropdown(choices=choices, value=choices[0][1] if choices else None)


# -- layout --------------------------------------------------------------------------------------
def _intro() -> str:
    data = f"`{views.public_dataset(SOURCE.spec)}`" + (
        f" ({views.DEMO_NOTE})" if SOURCE.is_demo_sample else f", revision `{SOURCE.revision}`"
    )
    notices = "".join(f"\n\n> {public_message(notice)}" for notice in SPACE.notices)
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
TYPES, PROTOCOLS = board_views.filter_choices(RESULTS)

with gr.Blocks(title="Personalized RewardBench") as demo:
    gr.Markdown(_intro())
    with gr.Tabs():
        with gr.Tab("Leaderboard"):
            with gr.Row():
                type_filter = gr.Dropdown(TYPES, value=views.ALL, label="Model type", allow_custom_value=True)
                protocol_filter = gr.Dropdown(PROTOCOLS, value=views.ALL, label="Protocol", allow_custom_value=True)
                show_demo = gr.Checkbox(
                    value=SOURCE.is_demo_sample, label="Show demo-sample runs (not benchmark results)"
                )
                refresh = gr.Button("Refresh", scale=0)
            gr.Markdown(
                "### Benchmark runs\nEvery pair of every subset; ranked by overall accuracy in %, 95 % Wilson interval. "
                "Click a column header to sort."
            )
            board = gr.Dataframe(
                headers=board_views.LEADERBOARD_COLUMNS, interactive=False, show_search="search", elem_id="leaderboard"
            )
            gr.Markdown(
                "### Partial runs\nA pair limit or only some subsets (every run started here): never ranked with full runs."
            )
            partial_board = gr.Dataframe(
                headers=board_views.LEADERBOARD_COLUMNS, interactive=False, elem_id="partial-leaderboard"
            )
            with gr.Group(visible=SOURCE.is_demo_sample) as demo_group:
                gr.Markdown(f"### Demo-sample runs\n{views.DEMO_NOTE}: never ranked with benchmark runs.")
                demo_board = gr.Dataframe(
                    headers=board_views.LEADERBOARD_COLUMNS, interactive=False, elem_id="demo-leaderboard"
                )
            with gr.Row():
                chart_section = gr.Radio(
                    list(board_views.CHART_SECTIONS),
                    value=board_views.default_chart_section(RESULTS, SOURCE.is_demo_sample),
                    label="Chart: one kind of run at a time",
                )
                chart_subset = gr.Radio(board_views.CHART_SUBSETS, value=views.OVERALL, label="Chart subset")
            chart = gr.BarPlot(
                x="run",
                y="accuracy (%)",
                color="type",
                y_lim=[0, 100],
                sort="-y",
                x_label_angle=-20,
                label="Accuracy per run",
            )

        with gr.Tab("Evaluate a model"):
            with gr.Row():
                with gr.Column(scale=1):
                    model = gr.Dropdown(MODEL_CHOICES, value=MODEL_CHOICES[0][1], label="Model (allowlisted)")
                    subsets = gr.CheckboxGroup(SUBSET_CHOICES, value=SUBSET_CHOICES, label="Subsets")
                    pairs = gr.Slider(
                        1, SPACE.pair_limit(), value=min(8, SPACE.pair_limit()), step=1, label="Pairs per subset"
                    )
                    profile_k = gr.Slider(
                        0, MAX_PROFILE_K, value=0, step=1, label="Profile-k (profile posts added to the question)"
                    )
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
                    margins = gr.BarPlot(
                        x="margin",
                        y="pairs",
                        y_aggregate="sum",
                        x_bin=1.0,
                        y_lim=[0, None],
                        label="Margins: chosen score − rejected score",
                    )
                    worst = gr.Dataframe(label="Pairs the model got most wrong", interactive=False, wrap=True)
                    with gr.Accordion("results.json", open=False):
                        results_json = gr.JSON()

        with gr.Tab("Explore pairs"):
            first_choices = pair_views.pair_choices(SOURCE, SUBSET_CHOICES[0])
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
                    posts = gr.Textbox(
                        label="Profile posts (optional)",
                        lines=4,
                        info=f"one post per line; up to {MAX_POSTS} posts of {MAX_POST_CHARS} characters",
                    )
                with gr.Column():
                    answer_a = gr.Textbox(label="Answer A", lines=6, info=f"up to {MAX_ANSWER_CHARS} characters")
                    answer_b = gr.Textbox(label="Answer B", lines=6, info=f"up to {MAX_ANSWER_CHARS} characters")
            score = gr.Button("Score both answers", variant="primary")
            try_summary = gr.Markdown()
            try_json = gr.JSON(visible=False)

    board_inputs = [type_filter, protocol_filter, chart_section, chart_subset]
    board_outputs = [board, partial_board, demo_board, chart]
    demo.load(leaderboard, board_inputs, board_outputs, api_name="leaderboard")
    for control in (type_filter, protocol_filter, chart_section, chart_subset):
        control.change(leaderboard, board_inputs, board_outputs, api_visibility="private")
    show_demo.change(lambda shown: gr.Group(visible=shown), show_demo, demo_group, api_visibility="private")
    refresh.click(refresh_store, None, None, api_visibility="private").then(
        refresh_filters, None, [type_filter, protocol_filter], api_visibility="private"
    ).then(leaderboard, board_inputs, board_outputs, api_visibility="private")
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
    score.click(
        try_your_own,
        [try_model, question, posts, answer_a, answer_b],
        [try_summary, try_json],
        api_name="try",
        concurrency_id="gpu",
        concurrency_limit=1,
    )
    explore_subset.change(pair_menu, explore_subset, pair_id, api_visibility="private")
    pair_outputs = [model_view, answer_key, chosen_text, rejected_text, stored_scores]
    pair_id.change(show_pair, [pair_id, explore_k], pair_outputs, api_name="pair")
    explore_k.change(show_pair, [pair_id, explore_k], pair_outputs, api_visibility="private")
    demo.load(show_pair, [pair_id, explore_k], pair_outputs, api_visibility="private")

demo.queue(max_size=int(os.environ.get("PRBENCH_QUEUE_SIZE", "20")), default_concurrency_limit=2)

if __name__ == "__main__":
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), show_error=False)
