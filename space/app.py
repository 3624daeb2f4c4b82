"""Personalized RewardBench Space: leaderboard, evaluate an allowlisted model, explore pairs, try your own.

A thin gr.Blocks face: the state lives in `personalized_rewardbench.space.context.SpaceContext` (settings,
allowlist, results store, data, scorers; runs and try-your-own services), the event handlers in
`space.handlers`, the tables and texts in `space.board` (leaderboard), `space.views` (one run, try your own),
`space.pairs` (explore) and `space.compare`. Scores come from the same scorers and engine as `prbench evaluate`,
so a run here writes the CLI's results.json.

Run locally: `python space/app.py` (127.0.0.1, the bundled sample, the offline baselines). Environment
variables are listed in `space_settings`'s docstring; GRADIO_SERVER_PORT picks the port. A configuration
error (unreadable allowlist, unreachable data) ends start-up with one line on stderr and exit status 2.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # ZeroGPU forks workers; tokenizers' threads must not run

import spaces  # first: on ZeroGPU it must patch torch before CUDA is touched

APP_DIR = Path(__file__).resolve().parent
try:
    import personalized_rewardbench  # noqa: F401  (bundled beside app.py on the Hub, installed locally)
except ImportError:
    sys.path.insert(0, str(APP_DIR.parent))

import gradio as gr

from personalized_rewardbench.data.schema import SUBSETS
from personalized_rewardbench.errors import UserError
from personalized_rewardbench.space import about as about_views
from personalized_rewardbench.space import board as board_views
from personalized_rewardbench.space import compare as compare_views
from personalized_rewardbench.space import pairs as pair_views
from personalized_rewardbench.space import views as views
from personalized_rewardbench.space.context import SpaceContext
from personalized_rewardbench.space.errors import public_message
from personalized_rewardbench.space.handlers import SECTIONS, Handlers, progress_reporter, visitor_errors
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

try:
    SPACE = SpaceContext(SpaceSettings.from_env(APP_DIR))
    SPACE.start()
except UserError as error:  # a configuration mistake: one line for the operator, no traceback
    print(error.render("space/app.py"), file=sys.stderr)
    sys.exit(2)


# -- GPU work: a no-op decorator off Spaces; on ZeroGPU the requested time is the estimate ---------
# The items arrive prepared (data loaded, profiles ranked in the main process): the GPU time is scoring only.
@spaces.GPU(duration=lambda config, model_id, prepared, seconds, progress=None: seconds)
@visitor_errors
def gpu_run(config, model_id, prepared, seconds, progress=None):
    return SPACE.runs.execute(
        config, model_id, prepared, on_progress=progress_reporter(progress), requested_seconds=seconds
    )


@spaces.GPU(duration=lambda model_id, item, seconds: seconds)
@visitor_errors
def gpu_score(model_id, item, seconds):
    return SPACE.tries.score_item(model_id, item)


# -- event handlers (personalized_rewardbench.space.handlers) ------------------------------------
HANDLERS = Handlers(SPACE, gpu_run=gpu_run, gpu_score=gpu_score)
SOURCE = HANDLERS.source
RESULTS = HANDLERS.results


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


#: Phone layout (≤ 640 px): tabs wrap instead of hiding behind a menu, side-by-side rows stack, tables keep
#: rank, model and overall pinned while the rest scrolls; dropdown arrows never cover their text.
CSS = """
.stack-on-phone { flex-wrap: wrap; }
.wrap-inner input, input[role="listbox"] { padding-right: 2rem !important; text-overflow: ellipsis; }
#tabs [role="tablist"] { flex-wrap: wrap; }
@media (max-width: 640px) {
  .stack-on-phone { flex-direction: column !important; }
  .stack-on-phone > * { min-width: 100% !important; width: 100% !important; }
  #tabs [role="tab"] { padding: 0.35rem 0.55rem !important; font-size: 0.9rem !important; }
  .board-legend, .board-legend p { font-size: 0.8rem !important; }
  #leaderboard td, #partial-leaderboard td, #demo-leaderboard td { font-size: 0.8rem; }
  #leaderboard td:nth-child(2), #partial-leaderboard td:nth-child(2), #demo-leaderboard td:nth-child(2) {
    max-width: 9.5rem; white-space: normal; word-break: break-word;
  }
}
"""

ALLOWED = list(SPACE.allowlist.models.values())
MODEL_CHOICES = [(SPACE.allowlist.label(model), model.id) for model in ALLOWED]
AVAILABLE = [model.id for model in ALLOWED if model.id not in SPACE.allowlist.unavailable] or [ALLOWED[0].id]
SUBSET_CHOICES = [name for name in SUBSETS if name in SOURCE.rows]
TYPES, PROTOCOLS = board_views.filter_choices(RESULTS)

with gr.Blocks(title="Personalized RewardBench") as demo:
    gr.Markdown(_intro())
    with gr.Tabs(overflow_behavior="wrap", elem_id="tabs") as tabs:
        with gr.Tab("Leaderboard", id="board", elem_id="tab-board"):
            with gr.Row(equal_height=True):
                search = gr.Textbox(
                    label="Search all tables", placeholder="model, type, protocol…", scale=2, elem_id="board-search"
                )
                type_filter = gr.Dropdown(TYPES, value=views.ALL, label="Model type", allow_custom_value=True, scale=1)
                protocol_filter = gr.Dropdown(
                    PROTOCOLS, value=views.ALL, label="Protocol", allow_custom_value=True, scale=1
                )
                refresh = gr.Button("Refresh", scale=0, min_width=90, elem_id="refresh-button")
            with gr.Row():
                show_demo = gr.Checkbox(
                    value=SOURCE.is_demo_sample, label="Show demo-sample runs (not benchmark results)"
                )
            with gr.Accordion("Columns", open=False):
                columns = gr.CheckboxGroup(
                    board_views.OPTIONAL,
                    value=board_views.DEFAULT_COLUMNS,
                    label="Shown besides rank, model and overall",
                    elem_id="board-columns",
                )
            gr.Markdown(
                "Accuracy in %: the share of pairs where the model scores *chosen* above *rejected* (ties are wrong). "
                "**overall** pools every pair (micro average); **macro** is the mean of the three subsets' accuracies. "
                "**95% CI**: Wilson interval. **k gain**: accuracy at profile-k > 0 minus the same model's k = 0 run "
                "on the same pairs, with McNemar's p. Sort with the ⋮ menu in a column header.",
                elem_classes=["board-legend"],
            )
            headings, tables = {}, {}
            for name, table_id in (("benchmark", "leaderboard"), ("partial", "partial-leaderboard")):
                headings[name] = gr.Markdown(elem_id=f"{table_id}-heading")
                tables[name] = gr.Dataframe(
                    headers=board_views.LEADERBOARD_COLUMNS,
                    interactive=False,
                    elem_id=table_id,
                    pinned_columns=3,
                    max_height=420,
                    wrap=True,
                )
            with gr.Group(visible=SOURCE.is_demo_sample) as demo_group:
                headings["demo"] = gr.Markdown(elem_id="demo-leaderboard-heading")
                tables["demo"] = gr.Dataframe(
                    headers=board_views.LEADERBOARD_COLUMNS,
                    interactive=False,
                    elem_id="demo-leaderboard",
                    pinned_columns=3,
                    max_height=420,
                    wrap=True,
                )
            gr.Markdown("### Chart\nOne kind of run at a time; the bars are the 95 % intervals.")
            with gr.Row():
                chart_section = gr.Radio(
                    board_views.chart_sections(SOURCE.is_demo_sample),
                    value=board_views.default_chart_section(RESULTS, SOURCE.is_demo_sample),
                    label="Runs",
                )
                chart_subset = gr.Radio(board_views.CHART_SUBSETS, value=views.OVERALL, label="Subset")
            chart = gr.Plot(label="Accuracy per run", elem_id="board-chart")

        with gr.Tab("Evaluate", id="evaluate", elem_id="tab-evaluate"):
            with gr.Row(elem_classes=["stack-on-phone"]):
                with gr.Column(scale=1, min_width=280):
                    model = gr.Dropdown(MODEL_CHOICES, value=AVAILABLE[0], label="Model (allowlisted)")
                    subsets = gr.CheckboxGroup(SUBSET_CHOICES, value=SUBSET_CHOICES, label="Subsets")
                    pairs = gr.Number(
                        value=min(8, SPACE.pair_limit()),
                        label="Pairs per subset",
                        info=f"1 to {SPACE.pair_limit()}; other values are brought into range, with a note",
                        elem_id="pairs-input",
                    )
                    profile_k = gr.Number(
                        value=0,
                        label="Profile-k (profile posts added to the question)",
                        info=f"0 to {MAX_PROFILE_K}; other values are brought into range, with a note",
                        elem_id="profile-k-input",
                    )
                    run = gr.Button("Run", variant="primary", elem_id="run-button")
                    with gr.Accordion("Allowlisted models", open=False):
                        gr.Dataframe(
                            [
                                [
                                    m.id,
                                    m.type,
                                    m.size_b or "-",
                                    SPACE.allowlist.unavailable.get(m.id, "yes"),
                                    m.description,
                                ]
                                for m in ALLOWED
                            ],
                            headers=["model", "type", "size (B)", "available", "description"],
                            interactive=False,
                            wrap=True,
                        )
                with gr.Column(scale=2, min_width=280):
                    summary = gr.Markdown(
                        "Pick a model and press **Run**: the result appears here.", elem_id="run-summary"
                    )
                    per_subset = gr.Dataframe(
                        label="Accuracy per subset", interactive=False, visible=False, elem_id="per-subset"
                    )
                    margins = gr.Plot(label="Margins", visible=False, elem_id="margins")
                    worst = gr.Dataframe(
                        label="Pairs the model got most wrong",
                        interactive=False,
                        wrap=True,
                        visible=False,
                        elem_id="worst-pairs",
                    )
                    with gr.Accordion("results.json", open=False):
                        results_json = gr.JSON()

        with gr.Tab("Explore", id="explore", elem_id="tab-explore"):
            first_choices = pair_views.pair_choices(SOURCE, SUBSET_CHOICES[0])
            with gr.Row(elem_classes=["stack-on-phone"]):
                explore_subset = gr.Dropdown(SUBSET_CHOICES, value=SUBSET_CHOICES[0], label="Subset", min_width=200)
                pair_id = gr.Dropdown(
                    first_choices,
                    value=first_choices[0][1],
                    label="Pair",
                    allow_custom_value=True,  # every subset's ids are accepted; the handler checks them
                    scale=2,
                    min_width=200,
                    elem_id="pair-menu",
                )
                explore_k = gr.Slider(0, MAX_PROFILE_K, value=3, step=1, label="Profile-k", min_width=200)
            with gr.Row(elem_classes=["stack-on-phone"]):
                with gr.Column(min_width=280):
                    prompt_kind = gr.Radio(
                        list(pair_views.PROMPT_KINDS), value=pair_views.PROMPT_KINDS[0], label="What the model sees, as"
                    )
                    model_view = gr.Textbox(
                        label="What the model sees (built by the package's prompt builder)",
                        lines=14,
                        max_lines=30,
                        interactive=False,
                        elem_id="model-view",
                    )
                with gr.Column(min_width=280):
                    with gr.Accordion("Answer key (shown to you, never to a model)", open=True):
                        answer_key = gr.Markdown(elem_id="answer-key")
            with gr.Row(elem_classes=["stack-on-phone"]):
                chosen_text = gr.Textbox(label="Chosen (fits the user)", lines=10, interactive=False, min_width=280)
                rejected_text = gr.Textbox(
                    label="Rejected (violates the user's aspects)", lines=10, interactive=False, min_width=280
                )
            gr.Markdown(f"### Scores of stored runs on this pair\n{pair_views.STORED_NOTE}")
            stored_scores = gr.Dataframe(
                interactive=False, wrap=True, pinned_columns=1, elem_id="stored-scores", visible=False
            )

        with gr.Tab("Compare", id="compare", elem_id="tab-compare") as compare_tab:
            gr.Markdown(
                "Two stored runs on the same pairs, pair by pair. McNemar's exact test uses only the pairs where "
                "exactly one run is right. Click a disagreement to open it in Explore."
            )
            first_run, second_run = compare_views.default_pair(RESULTS)
            run_menu = compare_views.run_choices(RESULTS)
            with gr.Row(elem_classes=["stack-on-phone"]):
                run_a = gr.Dropdown(
                    run_menu, value=first_run, label="Run A", min_width=280, elem_id="run-a", allow_custom_value=True
                )
                run_b = gr.Dropdown(
                    run_menu, value=second_run, label="Run B", min_width=280, elem_id="run-b", allow_custom_value=True
                )
            compare_button = gr.Button("Compare", variant="primary", elem_id="compare-button")
            compare_summary = gr.Markdown(elem_id="compare-summary")
            compare_subsets = gr.Dataframe(
                label="Per subset (A − B in points, 95 % interval of the paired difference)",
                interactive=False,
                visible=False,
                pinned_columns=1,
                elem_id="compare-subsets",
            )
            disagreements = gr.Dataframe(
                label="Pairs where the runs disagree (click one to open it in Explore)",
                interactive=False,
                wrap=True,
                visible=False,
                elem_id="disagreements",
            )

        with gr.Tab("Try", id="try", elem_id="tab-try"):
            with gr.Row():
                with gr.Column():
                    try_model = gr.Dropdown(MODEL_CHOICES, value=AVAILABLE[0], label="Model (allowlisted)")
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

        with gr.Tab("About", id="about", elem_id="tab-about"):
            gr.Markdown(
                about_views.about_markdown(os.environ.get("SPACE_ID"), SPACE.settings.results_repo),
                elem_id="about-text",
            )
            gr.Code(about_views.CITATION, language=None, label="BibTeX", interactive=False, elem_id="citation")

    board_inputs = [type_filter, protocol_filter, search, columns, show_demo, chart_section, chart_subset]
    board_outputs = [component for name in SECTIONS for component in (headings[name], tables[name])]
    board_outputs.append(chart)
    demo.load(HANDLERS.leaderboard, board_inputs, board_outputs, api_name="leaderboard")
    for control in (type_filter, protocol_filter, columns, chart_section, chart_subset):
        control.change(HANDLERS.leaderboard, board_inputs, board_outputs, api_visibility="private")
    search.change(
        HANDLERS.leaderboard, board_inputs, board_outputs, api_visibility="private", trigger_mode="always_last"
    )
    show_demo.change(
        HANDLERS.demo_shown, [show_demo, chart_section], [demo_group, chart_section], api_visibility="private"
    ).then(HANDLERS.leaderboard, board_inputs, board_outputs, api_visibility="private")
    refresh.click(HANDLERS.refresh_store, None, None, api_visibility="private").then(
        HANDLERS.refresh_filters, None, [type_filter, protocol_filter], api_visibility="private"
    ).then(HANDLERS.leaderboard, board_inputs, board_outputs, api_visibility="private")
    run.click(
        HANDLERS.clear_run, None, [summary, per_subset, margins, worst, results_json], api_visibility="private"
    ).then(
        HANDLERS.evaluate,
        [model, subsets, pairs, profile_k],
        [summary, per_subset, margins, worst, results_json],
        api_name="evaluate",
        concurrency_id="gpu",
        concurrency_limit=1,
    ).then(HANDLERS.refresh_filters, None, [type_filter, protocol_filter], api_visibility="private").then(
        HANDLERS.leaderboard, board_inputs, board_outputs, api_visibility="private"
    )
    score.click(lambda: ("", None), None, [try_summary, try_json], api_visibility="private").then(
        HANDLERS.try_your_own,
        [try_model, question, posts, answer_a, answer_b],
        [try_summary, try_json],
        api_name="try",
        concurrency_id="gpu",
        concurrency_limit=1,
    )
    explore_subset.change(HANDLERS.pair_menu, [explore_subset, pair_id], pair_id, api_visibility="private")
    pair_outputs = [model_view, answer_key, chosen_text, rejected_text, stored_scores]
    compare_tab.select(HANDLERS.compare_menus, [run_a, run_b], [run_a, run_b], api_visibility="private")
    compare_button.click(
        HANDLERS.compare, [run_a, run_b], [compare_summary, compare_subsets, disagreements], api_name="compare"
    )
    disagreements.select(
        HANDLERS.open_in_explore, disagreements, [tabs, explore_subset, pair_id], api_visibility="private"
    )
    pair_inputs = [pair_id, explore_k, prompt_kind]
    pair_id.change(HANDLERS.show_pair, pair_inputs, pair_outputs, api_name="pair")
    for control in (explore_k, prompt_kind):
        control.change(HANDLERS.show_pair, pair_inputs, pair_outputs, api_visibility="private")
    demo.load(HANDLERS.show_pair, pair_inputs, pair_outputs, api_visibility="private")

demo.queue(max_size=SPACE.settings.queue_size, default_concurrency_limit=2)

if __name__ == "__main__":
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        show_error=False,
        css=CSS,
        max_file_size=SPACE.settings.max_file_size,  # the Space takes no files: refuse anonymous uploads
    )
