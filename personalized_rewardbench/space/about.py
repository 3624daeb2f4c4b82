"""The Space's About tab: what the benchmark measures, how the numbers are computed, how to submit a run.

Facts only (from the paper and this package's protocol); the citation is a copyable BibTeX block.

>>> "Wilson" in about_markdown(None, None) and "@misc{" in CITATION
True
"""

from __future__ import annotations

from personalized_rewardbench.data.sources import UPSTREAM_REPO
from personalized_rewardbench.space.views import HUB_URL

PAPER_URL = "https://arxiv.org/abs/2604.07343"
DATASET_URL = f"{HUB_URL}/datasets/{UPSTREAM_REPO}"
CITATION = """@misc{ma2026personalizedrewardbench,
  title = {Personalized RewardBench},
  author = {Ma, Qiyao and others},
  year = {2026},
  eprint = {2604.07343},
  archivePrefix = {arXiv}
}"""


def _metric_link(space_id: str | None) -> str:
    if space_id:
        return f"[`metric/personalized_accuracy`]({HUB_URL}/spaces/{space_id}/tree/main/metric/personalized_accuracy)"
    return "`metric/personalized_accuracy` (bundled with this Space)"


def about_markdown(space_id: str | None, results_repo: str | None) -> str:
    """The About tab's text (the citation is shown separately, as a code block)."""
    submit_to = (
        f"the results dataset [`{results_repo}`]({HUB_URL}/datasets/{results_repo})"
        if results_repo
        else "this Space's results dataset (ask its maintainers for the repository)"
    )
    repo = results_repo or "OWNER/RESULTS"
    return f"""
## What it measures

Does a reward model prefer the answer that fits **this** user? Each pair holds a real user's question from a
StackExchange-like site, the user's earlier posts (the *profile*), and two answers of similar quality and
length: **chosen** follows what the user wants, **rejected** deliberately violates it. The user's *narrative*
and the *rubric aspects* distilled from it are the answer key: shown in Explore, never given to a model.
Three subsets: Art & Entertainment (767 pairs), Lifestyle & Personal Development (989), Society & Culture (1,074).

## How the numbers are computed

- **Accuracy**: the share of pairs where the model scores *chosen* above *rejected*. A **tie is wrong**.
  A pairwise judge decides every pair twice (chosen shown first, then second); its accuracy is over both verdicts,
  and an answer without a verdict is wrong.
- **overall** pools every pair (micro average); **macro** is the plain mean of the three subsets' accuracies,
  so each subset weighs the same whatever its size.
- **95 % interval**: the Wilson score interval of the accuracy (it stays inside 0–100 % and is honest for small runs).
- **Ranks**: only full benchmark runs are ranked. Two runs share a rank unless McNemar's exact test on the pairs
  both scored says they differ (p < 0.05); the test counts only the pairs where exactly one run is right.
- **Profile-k**: how many of the user's posts are added to the question (0 = the question alone). Posts are ranked
  by relevance to the question with a **retriever** (`contriever` as upstream, `minilm` offline, or `bm25`); the
  top k are added, most relevant first. **k gain** is a model's accuracy at k > 0 minus its k = 0 run on the same pairs.
- **Protocols**: a *classifier* reward model scores the chat [user: question (+ posts), assistant: answer] through
  its own chat template; a *pairwise judge* (an instruct model) reads both answers and names the better one; a
  *rating judge* rates each answer 0–10 on its own. Explore shows the exact text each one reads.
- **Baselines**: `baseline:length` (the longer answer wins), `baseline:random` (a seeded coin flip) and
  `baseline:embedding` (MiniLM similarity to the question and posts) mark the floor.
- Runs on the bundled **demo sample** are not benchmark results; partial runs (a pair limit or some subsets)
  are never ranked with full runs.

## Run the full benchmark and submit it

```bash
pip install -e .                                                       # in a clone of this package
prbench evaluate --model ORG/MODEL --profile-k 0 --output results      # every pair of every subset
prbench evaluate --model ORG/MODEL --profile-k 10 --output results     # with the user's top 10 posts
prbench leaderboard results                                            # your runs, ranked as here
hf upload {repo} results/ORG__MODEL ORG__MODEL --repo-type dataset --create-pr   # propose them
```

A run is its folder: `results.json` (figures, protocol, revisions), `scores.jsonl` (one line per pair) and
`run.json`. Submissions go to {submit_to}; the leaderboard reads them as they are, so every number can be checked.

## Links

- Paper: [arXiv 2604.07343]({PAPER_URL})
- Dataset: [`{UPSTREAM_REPO}`]({DATASET_URL})
- Metric module: {_metric_link(space_id)}

## Citation
"""
