"""The Space bundle runs on its own: it carries the library and the metric module it computes through."""

from __future__ import annotations

import json
import subprocess
import sys

from personalized_rewardbench.cli import main


def test_space_bundle_is_self_contained(tmp_path, capsys):
    out = tmp_path / "space-bundle"
    assert main(["space", "build", "--out", str(out)]) == 0
    for name in ("app.py", "README.md", "requirements.txt", "models.yaml"):
        assert (out / name).is_file()
    assert (out / "personalized_rewardbench" / "runs" / "engine.py").is_file()
    assert (out / "metric" / "personalized_accuracy" / "personalized_accuracy.py").is_file()
    assert not list(out.rglob("__pycache__"))
    probe = (
        "import json, sys; sys.path.insert(0, '.');"
        "import personalized_rewardbench as p; from personalized_rewardbench.accuracy import pointwise_accuracy;"
        "from personalized_rewardbench.resources import metric_dir;"
        "r = pointwise_accuracy([2.0, 1.0, 0.0], [1.0, 1.0, 3.0]);"
        "print(json.dumps([p.__file__, str(metric_dir()), r['accuracy'], r['num_ties']]))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=out, capture_output=True, text=True, check=True)
    library, metric, accuracy, ties = json.loads(result.stdout.strip().splitlines()[-1])
    assert library.startswith(str(out)) and metric.startswith(str(out))
    assert (accuracy, ties) == (1 / 3, 1)
    assert main(["space", "build", "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
