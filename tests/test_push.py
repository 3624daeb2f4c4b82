"""`prbench release push` end to end against a real HTTP server on 127.0.0.1 (tests/local_hub.py).

huggingface_hub runs its real request flow (create_repo, list_repo_refs, upload_folder with its README check,
preupload and ndjson commit, create_tag); only the Hub is local. Offline mode is lifted for these tests alone,
and every request huggingface_hub sends goes through a guard that fails the test unless it is for 127.0.0.1.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
from cli_errors import user_error
from huggingface_hub import constants
from huggingface_hub.utils import _http
from local_hub import INITIAL_GITATTRIBUTES, LocalHub

from personalized_rewardbench.cli import main
from personalized_rewardbench.release.push import plan_push

REPO = "me/prb"
WRITES = {"validate_yaml", "preupload", "commit", "tag"}


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("push") / "prb-sample"
    assert (
        main(["release", "build", "--source", "sample", "--version", "0.1.0", "--out", str(out), "--repo", REPO]) == 0
    )
    return out


@pytest.fixture
def hub():
    with LocalHub() as hub:
        yield hub


@pytest.fixture
def online(hub, monkeypatch, tmp_path):
    """Point huggingface_hub at the local hub with its token, for this test only; yield the URLs it requested."""
    sent: list[httpx2.URL] = []

    def only_local(request: httpx2.Request) -> None:
        sent.append(request.url)
        if request.url.host != "127.0.0.1":
            raise AssertionError(f"huggingface_hub tried to reach {request.url}")

    def client() -> httpx2.Client:
        hooks = {"request": [only_local, _http.hf_request_event_hook]}
        return httpx2.Client(event_hooks=hooks, follow_redirects=True, timeout=10, trust_env=False)

    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
    for name in ("HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)  # read at import; the constant is what HfApi uses now
    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    previous = _http._GLOBAL_CLIENT_FACTORY
    huggingface_hub.set_client_factory(client)
    yield sent
    huggingface_hub.set_client_factory(previous)


def _push(folder: Path, tag: str = "v0.1.0", *extra: str) -> int:
    return main(["release", "push", "--dir", str(folder), "--repo", REPO, "--tag", tag, *extra])


def _one_line_error(capsys) -> str:
    """The error line and its hint as one string (see cli_errors.user_error for the shape)."""
    line, hint = user_error(capsys.readouterr().err)
    return f"{line} (hint: {hint})" if hint else line


def _all_local(hub: LocalHub, sent: list[httpx2.URL]) -> None:
    assert sent and all(url.host == "127.0.0.1" and url.port == hub.port for url in sent)
    assert len(sent) == len(hub.requests)
    assert all(r.client == "127.0.0.1" and r.host == f"127.0.0.1:{hub.port}" for r in hub.requests)
    assert not hub.unknown_routes, [(r.method, r.path) for r in hub.unknown_routes]


@pytest.mark.parametrize("xet", [True, False], ids=["hf_xet-pipeline", "create_commit"])
def test_push_uploads_exactly_the_release_and_tags_the_upload_commit(release, hub, online, capsys, monkeypatch, xet):
    # With hf_xet installed upload_folder streams through its pipeline; without, it calls create_commit.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", not xet)
    assert _push(release) == 0
    out = capsys.readouterr().out
    repo = hub.repo(REPO)
    oid = repo.tags["v0.1.0"]
    assert f"pushed {REPO} at {oid}, tagged v0.1.0" in out
    assert repo.branches["main"] == oid and repo.tag_messages["v0.1.0"] == "Release v0.1.0"

    commit = repo.commits[oid]
    planned = [path for path, _ in plan_push(release, REPO, "v0.1.0").files]
    assert "README.md" in planned and "release.json" in planned and any(p.endswith(".parquet") for p in planned)
    assert sorted(commit.written) == planned
    assert commit.written == {path: (release / path).read_bytes() for path in planned}
    assert commit.message == "Release v0.1.0" and commit.deleted == []
    assert repo.commits[commit.parent].message == "initial commit"  # the hub's own first commit
    assert repo.files("v0.1.0") == {**commit.written, ".gitattributes": INITIAL_GITATTRIBUTES}
    assert len(repo.commits) == 2

    routes = hub.routes()
    assert set(routes) == {"create_repo", "refs", *WRITES}
    assert routes.count("commit") == 1 and routes.count("tag") == 1
    assert routes.index("refs") < routes.index("commit") < routes.index("tag")
    assert all(r.authorization == f"Bearer {hub.token}" for r in hub.requests)
    assert all(r.status == 200 for r in hub.requests)
    _all_local(hub, online)


def test_pushing_an_existing_tag_is_refused_and_moves_nothing(release, hub, online, capsys, tmp_path):
    assert _push(release) == 0
    capsys.readouterr()
    repo = hub.repo(REPO)
    before = (dict(repo.tags), dict(repo.branches), set(repo.commits))
    seen = len(hub.requests)

    changed = tmp_path / "changed"
    shutil.copytree(release, changed)
    (changed / "CHANGELOG.md").write_text("## v0.1.0\n\nSomething else.\n")
    for folder in (release, changed):
        assert _push(folder) == 2
        err = _one_line_error(capsys)
        assert "tag v0.1.0 already exists on me/prb" in err and "immutable" in err

    assert (repo.tags, repo.branches, set(repo.commits)) == before
    assert not WRITES & set(hub.routes()[seen:])  # refused before any upload
    _all_local(hub, online)


def test_wrong_token_is_one_line_and_writes_nothing(release, hub, online, capsys, monkeypatch):
    wrong = "hf_wrongTOKENwrongTOKEN"
    monkeypatch.setenv("HF_TOKEN", wrong)
    assert _push(release) == 2
    err = _one_line_error(capsys)
    assert "push to me/prb failed (HTTP 401)" in err and "token" in err and wrong not in err
    assert hub.repos == {}
    assert all(r.status == 401 and r.authorization == f"Bearer {wrong}" for r in hub.requests)
    assert not WRITES & set(hub.routes())
    _all_local(hub, online)


def test_dry_run_sends_no_request_with_the_hub_up(release, hub, online, capsys):
    assert _push(release, "v0.1.0", "--dry-run") == 0
    assert "dry run" in capsys.readouterr().out
    assert hub.requests == [] and online == [] and hub.repos == {}


def test_hidden_files_at_any_depth_are_neither_listed_nor_uploaded(release, hub, online, tmp_path):
    folder = tmp_path / "with-hidden"
    shutil.copytree(release, folder)
    (folder / ".notes").write_text("local notes")
    (folder / "data" / ".DS_Store").write_bytes(b"\0junk")
    (folder / "data" / ".tmp").mkdir()
    (folder / "data" / ".tmp" / "part.parquet").write_bytes(b"partial")
    planned = [path for path, _ in plan_push(folder, REPO, "v0.1.0").files]
    assert planned == [path for path, _ in plan_push(release, REPO, "v0.1.0").files]
    assert _push(folder) == 0
    repo = hub.repo(REPO)
    assert sorted(repo.commits[repo.tags["v0.1.0"]].written) == planned


def test_readme_metadata_the_hub_rejects_is_one_line(release, hub, online, capsys, tmp_path):
    folder = tmp_path / "bad-card"
    shutil.copytree(release, folder)
    readme = folder / "README.md"
    readme.write_text(readme.read_text().replace("license: apache-2.0", "license: [apache-2.0", 1))
    assert _push(folder) == 2
    err = _one_line_error(capsys)
    assert f"{readme}: the Hub rejects its metadata" in err and "not valid YAML" in err
    repo = hub.repo(REPO)
    assert repo.tags == {} and len(repo.commits) == 1  # only the hub's initial commit
    assert not {"preupload", "commit", "tag"} & set(hub.routes())


def test_unreachable_hub_and_offline_mode_are_one_line(release, hub, online, capsys, monkeypatch):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setattr(constants, "ENDPOINT", closed)
    assert _push(release) == 2
    assert f"cannot reach {closed} (" in _one_line_error(capsys)

    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert _push(release) == 2
    assert _one_line_error(capsys).endswith("HF_HUB_OFFLINE is set: cannot push to me/prb (hint: unset HF_HUB_OFFLINE)")
    assert hub.requests == []
