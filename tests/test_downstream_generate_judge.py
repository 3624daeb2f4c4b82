"""`prbench bon generate` and `bon judge` on real tiny models and a real OpenAI-compatible server."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from chat_server import make_app, serving

from personalized_rewardbench.cli import main
from personalized_rewardbench.downstream.generation import Sampling, TransformersGenerator, sample_seed
from personalized_rewardbench.downstream.rubric_judge import JudgeConfig, judge_candidates
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("policy") / "lm", seed=3)


def _generate(policy: Path | str, output: Path, *extra: str) -> int:
    args = ["bon", "generate", "--policy", str(policy), "--n", "4", "--profile-k", "2", "--data", "sample"]
    args += ["--limit", "1", "--retriever", "bm25", "--max-new-tokens", "12", "--device", "cpu", "--no-progress"]
    return main([*args, "--output", str(output), *extra])


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "candidates.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def generated(policy, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("gen") / "a"
    assert _generate(policy, output, "--batch-size", "16") == 0
    return output


def test_generate_writes_n_seeded_candidates_per_item(generated, policy, tmp_path, capsys):
    records = _records(generated)
    assert [r["id"] for r in records] == ["0_0_0", "1_0_0", "2_0_0"]  # --limit 1 of each subset, dataset order
    assert all(len(r["candidates"]) == 4 for r in records)
    assert all(len(set(r["candidates"])) == 4 for r in records)  # sampled, each with its own seed
    identity = json.loads((generated / "run.json").read_text())
    assert identity["n"] == 4 and identity["temperature"] == 0.8 and identity["top_p"] == 0.9
    assert identity["policy_prompt"] == "policy-v1" and identity["backend"] == "transformers"
    # another batch size (other rows share each generate call): the same texts
    assert _generate(policy, tmp_path / "b", "--batch-size", "4") == 0
    assert (tmp_path / "b" / "candidates.jsonl").read_bytes() == (generated / "candidates.jsonl").read_bytes()
    # another seed: other texts
    assert _generate(policy, tmp_path / "c", "--seed", "7") == 0
    assert all(a["candidates"] != c["candidates"] for a, c in zip(records, _records(tmp_path / "c")))
    # the same folder with other settings is refused in one line
    capsys.readouterr()
    assert _generate(policy, generated, "--seed", "7") == 2
    assert "holds a run with a different seed" in capsys.readouterr().err


def test_each_sample_depends_only_on_its_seed(policy):
    generator = TransformersGenerator(str(policy), device="cpu", dtype="float32")
    chat = [{"role": "user", "content": "Which anime should I watch next?"}]
    other = [{"role": "user", "content": "A much longer and different question, to force padding of the other row."}]
    sampling = Sampling(max_new_tokens=10)
    alone = generator.generate([chat], [11], sampling)
    batched = generator.generate([other, chat, chat], [5, 11, 12], sampling)
    assert batched[1] == alone[0] and batched[2] != alone[0]
    assert generator.generate([chat], [0], Sampling(temperature=0, max_new_tokens=10)) == generator.generate(
        [chat], [99], Sampling(temperature=0, max_new_tokens=10)
    )  # greedy ignores the seed


def test_generate_through_an_openai_compatible_server(policy, generated, tmp_path):
    model = TransformersGenerator(str(policy), device="cpu", dtype="float32")
    requests: list[dict] = []

    def respond(messages, body):
        sampling = Sampling(temperature=body["temperature"], top_p=body["top_p"], max_new_tokens=body["max_tokens"])
        return model.generate([messages], [body["seed"]], sampling)[0]

    with serving(make_app(respond, requests)) as url:
        assert _generate("tiny-policy", tmp_path / "server", "--base-url", url, "--concurrency", "3") == 0
    records = _records(tmp_path / "server")
    expected_seeds = {sample_seed(42, r["id"], j) for r in records for j in range(4)}
    assert {body["seed"] for body in requests} == expected_seeds and len(requests) == 12
    assert {body["model"] for body in requests} == {"tiny-policy"}
    assert json.loads((tmp_path / "server" / "run.json").read_text())["backend"] == "server"
    # the server runs the same model with the same per-sample seeds: the same candidates as the local run
    assert [r["candidates"] for r in records] == [r["candidates"] for r in _records(generated)]


def test_unreachable_server_is_one_line(tmp_path, capsys):
    assert _generate("tiny", tmp_path / "x", "--base-url", "http://127.0.0.1:9") == 2
    err = capsys.readouterr().err
    assert err.startswith("prbench: error: --base-url http://127.0.0.1:9/v1/chat/completions: ConnectError")
    assert "Traceback" not in err and err.count("\n") == 1


def test_judge_is_called_once_per_unique_candidate(policy, tmp_path, capsys):
    # greedy decoding: the 4 candidates of an item are one text, so 3 unique candidates for 12 slots
    assert _generate(policy, tmp_path / "greedy", "--temperature", "0") == 0
    assert all(len(set(r["candidates"])) == 1 for r in _records(tmp_path / "greedy"))
    config = JudgeConfig(judge=str(policy), candidates=tmp_path / "greedy", device="cpu", max_new_tokens=8)
    first = judge_candidates(config)
    assert first.judged_now == 3 and len(first.records) == 3
    # a random tiny model writes no `Ratings:` list: reported as unparsable, never given a rating
    assert all(r["ratings"] is None and r["quality"] is None for r in first.records)
    again = judge_candidates(config)
    assert again.judged_now == 0 and again.records == first.records
    capsys.readouterr()
    assert main(["bon", "judge", "--judge", str(policy), "--candidates", str(tmp_path / "greedy"), "--device", "cpu",
                 "--max-new-tokens", "8", "--no-progress"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "3 unique candidates judged (0 in this run); unparsable (excluded, never defaulted): 3" in out
    assert main(["bon", "curve", str(tmp_path / "greedy")]) == 2
    assert "no finished score run" in capsys.readouterr().err


def test_judge_reads_the_rubric_and_keys_by_item_and_text(generated, tmp_path):
    requests: list[dict] = []

    def respond(messages, body):
        user = messages[-1]["content"]
        count = int(user.split("Aspects this user needs addressed (")[1].split(")")[0])
        return "Ratings: [" + ", ".join(["2"] * count) + "]"

    with serving(make_app(respond, requests)) as url:
        outcome = judge_candidates(JudgeConfig(judge="canned", candidates=generated, base_url=url, progress=False))
    assert outcome.judged_now == 12 and all(r["quality"] == 2.0 for r in outcome.records)
    assert all(body["temperature"] == 0 for body in requests)
    from personalized_rewardbench.data.sources import load_source

    rows = {row["id"]: row for rows in load_source("sample").rows.values() for row in rows}
    for body in requests:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        assert "Ratings: [r1, r2, ...]" in system
        item = next(row for row in rows.values() if row["question"] in user)
        assert all(aspect["aspect"] in user for aspect in item["rubric_aspects"])
        assert item["narrative"] not in user  # the rubric, not the narrative
    assert outcome.folder.parent.name == "judge" and outcome.folder.name.startswith("canned-rubric-v1-")


def test_vllm_backend_without_vllm_is_one_line(policy, tmp_path, capsys):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    assert _generate(policy, tmp_path / "v", "--backend", "vllm") == 2
    err = capsys.readouterr().err
    assert err.startswith("prbench: error: --backend vllm: the vllm package is not installed") and err.count("\n") == 1
    assert main(["bon", "judge", "--judge", str(policy), "--candidates", str(tmp_path / "none")]) == 2
    assert "is not a candidates folder" in capsys.readouterr().err
