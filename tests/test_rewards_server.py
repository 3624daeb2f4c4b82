"""The reward server on 127.0.0.1 (real uvicorn), its clients, and the verl reward function."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import uvicorn

from personalized_rewardbench.data.eval_items import EvalItem
from personalized_rewardbench.data.retrieval import BM25Retriever
from personalized_rewardbench.rewards.datasets import prepare, write_verl_parquet
from personalized_rewardbench.rewards.entries import parse_posts
from personalized_rewardbench.rewards.server import RewardService, ServerLimits, create_app
from personalized_rewardbench.rewards.settings import RewardSettings, build_scorer
from personalized_rewardbench.rewards.verl_reward import RewardServerError, compute_score, compute_score_batch
from personalized_rewardbench.scoring.base import AnswerGroup
from personalized_rewardbench.testing.tiny_models import build_tiny_reward_model

K = 2
ANSWERS = ["Watch Mushishi.", "Read the manga first, then decide.", "Skip it.", "Try the film; it is short and calm."]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ThreadedServer:
    """uvicorn serving `app` in a thread on a free port of 127.0.0.1."""

    def __init__(self, app):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def post(url: str, payload, raw: bytes | None = None, timeout: float = 60):
    data = raw if raw is not None else json.dumps(payload).encode()
    request = urllib.request.Request(url + "/score", data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url: str, path: str):
    with urllib.request.urlopen(url + path, timeout=30) as response:
        return response.status, json.loads(response.read())


@pytest.fixture(scope="module")
def rm(tmp_path_factory):
    return build_tiny_reward_model(tmp_path_factory.mktemp("server-rm") / "rm", seed=3)


@pytest.fixture(scope="module")
def settings(rm, tmp_path_factory):
    cache = tmp_path_factory.mktemp("server-cache")
    return RewardSettings(str(rm), profile_k=K, retriever="bm25", device="cpu", dtype="float32", cache_dir=cache)


@pytest.fixture(scope="module")
def items(settings):
    return prepare("sample", limit=1, profile_k=K, retriever="bm25", cache_dir=settings.cache_dir)


@pytest.fixture(scope="module")
def server(settings):
    service = RewardService(build_scorer(settings), settings, ServerLimits(max_items=8, max_bytes=20_000))
    with ThreadedServer(create_app(service)) as running:
        running.service = service
        yield running


@pytest.fixture(scope="module")
def direct(settings):
    """Scores from a separate scorer: answer `a` of item `i`, scored alone."""
    scorer = build_scorer(settings)

    def score(item: EvalItem, answer: str) -> float:
        return scorer.score_answers([AnswerGroup(item, (answer,))])[0].scores[0]

    return score


def _request(item: EvalItem, answer: str) -> dict:
    return {
        "question": item.question,
        "response": answer,
        "posts": [{"category": p.category, "text": p.text} for p in item.posts],
    }


def test_concurrent_clients_get_the_direct_scores(server, items, direct):
    jobs = [(n % len(items), [a for a in ANSWERS[: 1 + n % 3]]) for n in range(16)]

    def client(job):
        index, answers = job
        return post(server.url, [_request(items[index], a) for a in answers], timeout=120)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(client, jobs))
    assert time.monotonic() - started < 120
    expected = {(i, a): direct(items[i], a) for i in range(len(items)) for a in ANSWERS}
    for (index, texts), (status, body) in zip(jobs, answers):
        assert status == 200, body
        assert body["scores"] == pytest.approx([expected[(index, a)] for a in texts], rel=1e-4, abs=1e-5)
        assert body["truncated"] == [False] * len(texts)
    stats = server.service.batcher.stats
    assert stats.requests >= 16 and stats.entries >= sum(len(t) for _i, t in jobs)


def test_full_profile_is_ranked_with_the_retriever(server, direct):
    from personalized_rewardbench.data.sources import load_source

    row = load_source("sample").rows["Society_and_Culture"][0]
    ranking = BM25Retriever().rank(row["question"], [p["text"] for p in row["profile"]])
    item = EvalItem(row["id"], "", row["question"], parse_posts([row["profile"][i] for i in ranking[:K]]), "", "")
    status, body = post(
        server.url, [{"question": row["question"], "profile": row["profile"], "id": row["id"], "response": ANSWERS[0]}]
    )
    assert status == 200, body
    assert body["scores"][0] == pytest.approx(direct(item, ANSWERS[0]), rel=1e-4, abs=1e-5)


def test_health_and_info(server, rm):
    assert get(server.url, "/health") == (200, {"status": "ok"})
    _status, info = get(server.url, "/info")
    assert info["model"] == str(rm) and info["model_type"] == "classifier"
    assert info["protocol"]["profile_k"] == K and info["protocol"]["retriever"] == "bm25"
    assert info["protocol"]["max_length"] > 0 and info["revision"]
    assert info["limits"]["max_items"] == 8 and info["limits"]["max_wait_ms"] <= 20
    assert info["prefix_cache"]["max_tokens"] == info["limits"]["prefix_cache_tokens"] == 16384


def test_a_prompt_sent_again_is_not_run_again(server, items, direct):
    """A GRPO group's completions split over two requests: the second reuses the prompt's kept states (a cache hit
    in /info) and still gets the scores each completion gets alone."""
    item = EvalItem("fresh", "", "A question no other test sends: which tea suits a rainy day?", items[0].posts, "", "")
    before = get(server.url, "/info")[1]["prefix_cache"]
    first = post(server.url, [_request(item, ANSWERS[3])])
    middle = get(server.url, "/info")[1]["prefix_cache"]
    second = post(server.url, [_request(item, ANSWERS[1]), _request(item, ANSWERS[2])])
    after = get(server.url, "/info")[1]["prefix_cache"]
    assert (middle["hits"], middle["misses"]) == (before["hits"], before["misses"] + 1)  # a new prompt: it runs
    assert after["hits"] == middle["hits"] + 1 and after["misses"] == middle["misses"]
    assert 0 < after["tokens"] <= after["max_tokens"]
    assert first[0] == second[0] == 200
    expected = [direct(item, answer) for answer in ANSWERS[1:4]]
    assert second[1]["scores"] + first[1]["scores"] == pytest.approx(expected, rel=1e-4, abs=1e-5)


@pytest.mark.parametrize(
    "payload, raw, status, message",
    [
        (None, b"{not json", 400, "not valid JSON"),
        ({"question": "q"}, None, 422, "JSON list"),
        ([], None, 422, "no items"),
        ([{"question": "q?"}], None, 422, "items[0].response must be a string"),
        ([{"question": "", "response": "a"}], None, 422, "question is empty"),
        ([{"question": "q?", "response": "a", "posts": "text"}], None, 422, "posts must be a list"),
        ([{"question": "q?", "response": "a", "posts": [], "profile": []}], None, 422, "send one"),
        ([{"question": "q?", "response": "a", "narrative": "x"}], None, 422, "unknown field(s) narrative"),
        ([{"question": "q?", "response": "a"}] * 9, None, 413, "limit is 8"),
        (None, json.dumps([{"question": "q" * 30_000, "response": "a"}]).encode(), 413, "limit"),
    ],
)
def test_malformed_requests_get_4xx_with_a_message(server, payload, raw, status, message):
    got, body = post(server.url, payload, raw)
    assert got == status
    assert message in body["error"]


def test_internal_failure_is_a_500_never_a_score(settings):
    class BrokenScorer:
        name, model_type, revision = "broken", "classifier", None

        def protocol(self):
            return {}

        def score_answers(self, groups):
            raise RuntimeError("CUDA out of memory (simulated)")

        def keep_prefixes(self, max_tokens):
            return None

    service = RewardService(BrokenScorer(), settings, ServerLimits())
    with ThreadedServer(create_app(service)) as running:
        status, body = post(running.url, [{"question": "q?", "response": "a"}])
    assert status == 500 and "out of memory" in body["error"] and "scores" not in body


def test_verl_functions_score_through_the_server(server, items, direct, tmp_path):
    import pyarrow.parquet as pq

    path = write_verl_parquet(items, tmp_path / "train.parquet")
    rows = pq.read_table(path).to_pylist()
    assert [r["extra_info"]["question"] for r in rows] == [i.question for i in items]
    expected = [direct(item, ANSWERS[n]) for n, item in enumerate(items)]
    single = [
        compute_score(r["data_source"], ANSWERS[n], r["reward_model"]["ground_truth"], r["extra_info"], url=server.url)
        for n, r in enumerate(rows)
    ]
    batched = compute_score_batch(
        [r["data_source"] for r in rows],
        ANSWERS[: len(rows)],
        [r["reward_model"]["ground_truth"] for r in rows],
        [r["extra_info"] for r in rows],
        url=server.url,
        max_items=2,
    )
    assert single == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert batched == pytest.approx(expected, rel=1e-4, abs=1e-5)


def test_verl_raises_after_its_retries_when_the_server_is_gone(items):
    extra = {"question": items[0].question, "posts": [], "id": items[0].id}
    gone = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(RewardServerError, match="after 3 attempts"):
        compute_score("personalized_rewardbench", "answer", "", extra, url=gone, retries=2, backoff=0.05)
    assert time.monotonic() - started < 10


def test_verl_refused_request_is_raised_at_once(server):
    with pytest.raises(RewardServerError, match="refused the request \\(413\\)"):
        compute_score_batch(["s"] * 9, ["a"] * 9, None, [{"question": "q?"}] * 9, url=server.url, max_items=9)


def test_prbench_serve_reward_cli(rm, items, direct, tmp_path):
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "personalized_rewardbench",
        "serve-reward",
        "--model",
        str(rm),
        "--port",
        str(port),
    ]
    options = ["--profile-k", str(K), "--retriever", "bm25", "--device", "cpu", "--dtype", "float32"]
    process = subprocess.Popen(command + options, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                if get(url, "/health")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "serve-reward did not come up"
            time.sleep(0.25)
        status, body = post(url, [_request(items[0], ANSWERS[1])])
        assert status == 200
        assert body["scores"][0] == pytest.approx(direct(items[0], ANSWERS[1]), rel=1e-4, abs=1e-5)
    finally:
        process.terminate()
        process.wait(30)
    bad = subprocess.run(command + ["--max-wait-ms", "50"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "prbench: error: --max-wait-ms must be between 0 and 20, got 50.0"


def test_prbench_reward_data_writes_verl_and_trl_files(tmp_path):
    import pyarrow.parquet as pq

    base = [sys.executable, "-m", "personalized_rewardbench", "reward-data", "--limit", "1", "--retriever", "bm25"]
    base += ["--cache-dir", str(tmp_path / "cache"), "--profile-k", "1"]
    verl = subprocess.run(
        base + ["--format", "verl", "--out", str(tmp_path / "v.parquet")], capture_output=True, text=True, timeout=120
    )
    assert verl.returncode == 0, verl.stderr
    rows = pq.read_table(tmp_path / "v.parquet").to_pylist()
    assert len(rows) == 3 and len(rows[0]["extra_info"]["posts"]) == 1
    assert "narrative" not in json.dumps(rows) and rows[0]["reward_model"] == {"style": "model", "ground_truth": ""}
    trl = subprocess.run(base + ["--out", str(tmp_path / "t.jsonl")], capture_output=True, text=True, timeout=120)
    assert trl.returncode == 0, trl.stderr
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [line["question"] for line in lines] == [r["extra_info"]["question"] for r in rows]


def test_batched_requests_score_as_they_would_alone(rm):
    """Requests about the same prompt share a group, but one request's long answer must not cost another posts."""
    from personalized_rewardbench.rewards.entries import RewardEntry, prompt_item, score_entries, score_requests

    scorer = build_scorer(RewardSettings(str(rm), profile_k=3, device="cpu", dtype="float32", max_length=400))
    posts = parse_posts([{"category": "anime", "text": " ".join(["word"] * 100)} for _ in range(3)])
    prompt = prompt_item("Which anime should I watch?", posts, "p")
    short = [RewardEntry(prompt, "Watch Mushishi.")]
    long = [RewardEntry(prompt, " ".join(["calm"] * 150))]
    together = score_requests(scorer, [short, long])
    alone = [score_requests(scorer, [short])[0], score_requests(scorer, [long])[0]]
    assert alone[0][0].truncated is False and alone[1][0].truncated is True  # the setup bites
    assert score_entries(scorer, short + long)[0].truncated is True  # one group: fitted over both answers
    assert together == alone
