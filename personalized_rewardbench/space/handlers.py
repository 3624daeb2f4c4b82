"""The Space's event handlers: each turns a visitor's inputs into the gradio updates of one tab.

`Handlers` binds them to one `SpaceContext`; `space/app.py` lays out the page and wires these methods to its
components. The tables, texts and figures come from `board`, `views`, `pairs` and `compare` (which never import
gradio); here they are wrapped into gradio components. `visitor_errors` turns any failure into one gr.Error line.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import gradio as gr

from personalized_rewardbench.errors import UserError
from personalized_rewardbench.space import board as board_views
from personalized_rewardbench.space import compare as compare_views
from personalized_rewardbench.space import pairs as pair_views
from personalized_rewardbench.space import views as views
from personalized_rewardbench.space.context import SpaceContext
from personalized_rewardbench.space.data import find_row
from personalized_rewardbench.space.errors import public_message
from personalized_rewardbench.space.rate_limit import visitor_id

logger = logging.getLogger("prbench.space")

#: The leaderboard's sections, in page order: benchmark runs ranked, partial runs, demo-sample runs.
SECTIONS = ("benchmark", "partial", "demo")


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


def progress_reporter(progress) -> Callable[[int, int], None] | None:
    """A `(done, total)` callback that moves gradio's progress bar, or None without one."""
    if progress is None:
        return None
    return lambda done, total: progress((done, total), desc="scoring pairs", unit="pairs")


class Handlers:
    """The event handlers of one Space; `gpu_run` and `gpu_score` are app.py's GPU-decorated scoring calls."""

    def __init__(self, space: SpaceContext, gpu_run: Callable, gpu_score: Callable) -> None:
        self.space = space
        self.results = space.results_dir
        self.source = space.source()
        self.gpu_run = gpu_run
        self.gpu_score = gpu_score
        self._logged: set[str] = set()  # leaderboard notices already logged

    # -- leaderboard -----------------------------------------------------------------------------
    @visitor_errors
    def leaderboard(self, type_filter, protocol_filter, search, columns, show_demo, chart_section, chart_subset):
        """Each section's heading and table (benchmark runs ranked, partial runs, demo-sample runs) and the chart."""
        skipped: list[str] = []
        sections = board_views.filtered_sections(self.results, type_filter, protocol_filter, search, skipped)
        for notice in skipped:
            if notice not in self._logged:  # once per file and reason, not on every refresh
                self._logged.add(notice)
                logger.warning("leaderboard: %s", notice)
        filtered = (
            bool((search or "").strip())
            or type_filter not in (views.ALL, None)
            or protocol_filter not in (views.ALL, None)
        )
        outputs = []
        for name in SECTIONS:
            frame = board_views.section_frame(sections[name], columns)
            outputs += [
                board_views.section_heading(name, sections[name], filtered),
                gr.Dataframe(
                    value=frame,
                    visible=not frame.empty,
                    datatype=["markdown" if column == "model" else "str" for column in frame.columns],
                    column_widths=[board_views.WIDTHS[column] for column in frame.columns],
                ),
            ]
        if skipped:  # above every table, under the first heading
            outputs[0] += "\n\n" + board_views.skipped_runs_note(len(skipped))
        shown = board_views.chart_sections(show_demo)
        section = chart_section if chart_section in shown else shown[0]
        rows = board_views.chart_rows(
            self.results, chart_subset, type_filter, protocol_filter, section, search, show_demo
        )
        title = f"{section}, {chart_subset}: accuracy per run"
        return *outputs, board_views.chart_figure(rows, title)

    def demo_shown(self, shown: bool, chart_section: str):
        """Show or hide the demo-sample table; the chart offers demo-sample runs only while they are shown."""
        choices = board_views.chart_sections(shown)
        return gr.Group(visible=shown), gr.Radio(
            choices=choices, value=chart_section if chart_section in choices else choices[0]
        )

    def refresh_filters(self):
        """Both filter menus with the model types and protocols of the stored runs."""
        types, protocols = board_views.filter_choices(self.results)
        return gr.Dropdown(choices=types), gr.Dropdown(choices=protocols)

    @visitor_errors
    def refresh_store(self):
        """Pull runs added to the Hub results dataset since the last pull (at most once a minute), and say so."""
        notice = self.space.refresh()
        if notice:
            gr.Warning(public_message(notice))
        else:
            gr.Info(f"Leaderboard refreshed: {len(board_views.leaderboard_rows(self.results))} stored runs.")

    # -- evaluate and try your own ---------------------------------------------------------------
    @visitor_errors
    def evaluate(self, model_id, subsets, pairs, profile_k, request: gr.Request, progress=gr.Progress()):
        """Score an allowlisted model on the chosen pairs (or serve the identical stored run)."""
        client = getattr(request, "client", None)
        visitor = visitor_id(getattr(request, "headers", None), getattr(client, "host", None))
        progress(0, desc="loading the pairs")
        plan, payload = self.space.runs.evaluate(
            model_id,
            subsets,
            pairs,
            profile_k,
            gpu_runner=lambda config, model, prepared, seconds: self.gpu_run(
                config, model, prepared, seconds, progress
            ),
            on_progress=progress_reporter(progress),
            on_ranking=lambda done, total: progress((done, total), desc="ranking profile posts", unit="pairs"),
            visitor=visitor,
        )
        results, records = payload["results"], payload["records"]
        worst = views.worst_pairs_frame(records, plan.data.items)
        return (
            views.summary_markdown(
                results, payload["reused"], [public_message(notice) for notice in payload["notices"]]
            ),
            gr.Dataframe(value=views.subset_frame(results), visible=True),
            gr.Plot(value=views.margin_figure(records), visible=True),
            gr.Dataframe(value=worst, visible=not worst.empty),
            views.public_results(results),
        )

    def clear_run(self):
        """Empty the result area before a run, so an error never sits beside an earlier run's result."""
        hidden = gr.Dataframe(value=None, visible=False)
        return "", hidden, gr.Plot(value=None, visible=False), hidden, None

    @visitor_errors
    def try_your_own(self, model_id, question, posts, answer_a, answer_b):
        """Both scores of a visitor's own pair and which answer the model prefers."""
        result = self.space.tries.try_pair(model_id, question, posts, answer_a, answer_b, gpu_runner=self.gpu_score)
        return views.try_markdown(result), result

    # -- explore and compare ---------------------------------------------------------------------
    @visitor_errors
    def show_pair(self, pair_id, profile_k, kind=pair_views.PROMPT_KINDS[0]):
        """What a model sees (built by the library's prompt builders), the answer key (for humans only), both
        answers, and the scores stored runs gave this pair."""
        row, item = self.space.data.pair(pair_id, profile_k)
        scores = pair_views.stored_scores_frame(self.results, self.source, row["id"])
        return (
            pair_views.model_input_text(item, kind),
            pair_views.answer_key_markdown(row),
            item.chosen,
            item.rejected,
            gr.Dataframe(value=scores, visible=not scores.empty),
        )

    def pair_menu(self, subset, current=None):
        """The pair menu of `subset`, keeping the current pair when it belongs to it."""
        choices = pair_views.pair_choices(self.source, subset)
        ids = [value for _, value in choices]
        return gr.Dropdown(choices=choices, value=current if current in ids else (ids[0] if ids else None))

    @visitor_errors
    def compare(self, run_a, run_b):
        """Two stored runs on the same pairs: per-subset difference with its interval, McNemar's p, agreement,
        and the pairs where they disagree."""
        result = compare_views.compare_runs(self.results, self.source, run_a, run_b)
        disagreements = result["disagreements"]
        return (
            result["summary"],
            gr.Dataframe(value=result["subsets"], visible=True),
            gr.Dataframe(value=disagreements, visible=not disagreements.empty),
        )

    def compare_menus(self, run_a, run_b):
        """Both run menus with every stored run (refreshed when the tab is opened)."""
        choices = compare_views.run_choices(self.results)
        keys = [key for _, key in choices]
        first, second = compare_views.default_pair(self.results)
        return (
            gr.Dropdown(choices=choices, value=run_a if run_a in keys else first),
            gr.Dropdown(choices=choices, value=run_b if run_b in keys else second),
        )

    def open_in_explore(self, table, evt: gr.SelectData):
        """A click on a disagreement opens that pair in Explore."""
        pair = str(table.iloc[evt.index[0]]["id"]) if table is not None and len(table) else ""
        found = find_row(self.source, pair)
        if found is None:  # a run on other data than this Space's: nothing to open
            return gr.Tabs(), gr.Dropdown(), gr.Dropdown()
        return gr.Tabs(selected="explore"), gr.Dropdown(value=found[0]), self.pair_menu(found[0], pair)
