"""Issue 11, class 3: damaged checkpoint folders end in one line naming the file, exit 2, no run folder.

Each damage is applied to a copy of a real tiny checkpoint (a reward model, and a causal LM used as a
pairwise judge) and the checkpoint goes through `prbench evaluate`.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from error_lines import one_error

from personalized_rewardbench.cli import main
from personalized_rewardbench.testing.tiny_models import build_tiny_causal_lm, build_tiny_reward_model


def _weights(folder: Path) -> bytes:
    return (folder / "model.safetensors").read_bytes()


def _header_end(folder: Path) -> int:
    return 8 + struct.unpack("<Q", _weights(folder)[:8])[0]


def _write(name: str, make):
    def damage(folder: Path) -> None:
        (folder / name).write_bytes(make(folder))

    return damage


def _config(change):
    def damage(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        change(config)
        (folder / "config.json").write_text(json.dumps(config))

    return damage


def _overlong_offsets(folder: Path) -> bytes:
    data = _weights(folder)
    header = json.loads(data[8 : _header_end(folder)])
    name = next(key for key in header if key != "__metadata__")
    header[name]["data_offsets"][1] += 10**6
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + data[_header_end(folder) :]


# (name, damage, file the error names)
SHAPES = [
    (
        "weights cut in half",
        _write("model.safetensors", lambda f: _weights(f)[: len(_weights(f)) // 2]),
        "model.safetensors",
    ),
    ("weights missing the last byte", _write("model.safetensors", lambda f: _weights(f)[:-1]), "model.safetensors"),
    ("weights header only", _write("model.safetensors", lambda f: _weights(f)[: _header_end(f)]), "model.safetensors"),
    (
        "weights header cut",
        _write("model.safetensors", lambda f: _weights(f)[: _header_end(f) - 5]),
        "model.safetensors",
    ),
    ("weights 8 bytes", _write("model.safetensors", lambda f: _weights(f)[:8]), "model.safetensors"),
    ("weights empty", _write("model.safetensors", lambda _f: b""), "model.safetensors"),
    ("weights NUL bytes", _write("model.safetensors", lambda _f: b"\x00" * 4096), "model.safetensors"),
    (
        "weights huge header",
        _write("model.safetensors", lambda _f: struct.pack("<Q", 10**12) + b"{}"),
        "model.safetensors",
    ),
    (
        "weights header not JSON",
        _write("model.safetensors", lambda _f: struct.pack("<Q", 5) + b"{abc}"),
        "model.safetensors",
    ),
    ("weights offsets past the end", _write("model.safetensors", _overlong_offsets), "model.safetensors"),
    (
        "weights are text",
        _write("model.safetensors", lambda _f: b"version https://git-lfs.github.com/spec/v1\n"),
        "model.safetensors",
    ),
    ("config cut in half", _write("config.json", lambda f: (f / "config.json").read_bytes()[:40]), "config.json"),
    ("config empty", _write("config.json", lambda _f: b""), "config.json"),
    ("config a list", _write("config.json", lambda _f: b"[1, 2]"), "config.json"),
    ("config null", _write("config.json", lambda _f: b"null"), "config.json"),
    ("config not UTF-8", _write("config.json", lambda _f: b'{"model_type": "\xff"}'), "config.json"),
    ("config without model_type", _config(lambda c: c.pop("model_type")), "model_type"),
    ("config of an unknown model_type", _config(lambda c: c.update(model_type="nope")), "nope"),
    ("config hidden_size a string", _config(lambda c: c.update(hidden_size="big")), "config.json"),
    ("config hidden_size doubled", _config(lambda c: c.update(hidden_size=2 * c["hidden_size"])), "config.json"),
    ("config vocab_size a float", _config(lambda c: c.update(vocab_size=1.5)), "config.json"),
    (
        "tokenizer.json cut",
        _write("tokenizer.json", lambda f: (f / "tokenizer.json").read_bytes()[:100]),
        "tokenizer.json",
    ),
    ("tokenizer.json a list", _write("tokenizer.json", lambda _f: b"[]"), "tokenizer.json"),
    ("tokenizer_config.json cut", _write("tokenizer_config.json", lambda _f: b'{"model_max'), "tokenizer_config.json"),
    ("tokenizer_config.json a number", _write("tokenizer_config.json", lambda _f: b"7"), "tokenizer_config.json"),
]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {
        "classifier": build_tiny_reward_model(root / "rm"),
        "judge-pairwise": build_tiny_causal_lm(root / "lm"),
    }


@pytest.mark.parametrize("model_type", ["classifier", "judge-pairwise"])
@pytest.mark.parametrize(("name", "damage", "named"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_damaged_checkpoint_is_one_line_naming_the_file(
    checkpoints, tmp_path, capsys, model_type, name, damage, named
):
    folder = tmp_path / "model"
    shutil.copytree(checkpoints[model_type], folder)
    damage(folder)
    out = tmp_path / "out"
    args = ["evaluate", "--model", str(folder), "--model-type", model_type, "--data", "sample", "--limit", "1"]
    code = main([*args, "--output", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2, (name, err)
    assert one_error(err) and "Traceback" not in err and err.startswith("prbench: error: "), err
    assert str(folder) in err and named in err, (name, err)
    assert not out.exists()


def test_a_model_safetensors_that_is_a_folder_is_one_line(checkpoints, tmp_path, capsys):
    folder = tmp_path / "model"
    shutil.copytree(checkpoints["classifier"], folder)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").mkdir()
    assert main(["evaluate", "--model", str(folder), "--data", "sample", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert one_error(err) and str(folder / "model.safetensors") in err
