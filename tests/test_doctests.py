"""Every docstring example in the package runs as part of the suite (`doctest` on each module).

Modules of the Space face import gradio; they are skipped only where gradio is not installed.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import personalized_rewardbench

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(personalized_rewardbench.__path__, prefix="personalized_rewardbench.")
    if not info.name.startswith("personalized_rewardbench._bundled") and not info.name.endswith(".__main__")
)  # __main__ runs the CLI when imported
NEEDS_GRADIO = ("personalized_rewardbench.space.",)


def test_the_walk_finds_every_subpackage():
    subpackages = {name.split(".")[1] for name in MODULES}
    assert {"data", "scoring", "runs", "release", "space", "testing", "cli", "errors", "accuracy"} <= subpackages


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    if name.startswith(NEEDS_GRADIO) and importlib.util.find_spec("gradio") is None:
        pytest.skip("the Space face needs gradio (pip install '.[space]')")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {name}"


BENCHMARK_HELPERS = ("alternating", "matmul_work")  # the benchmarks' parts that need no model


@pytest.mark.parametrize("name", BENCHMARK_HELPERS)
def test_benchmark_helper_docstring_examples(name: str) -> None:
    path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{result.failed} of {result.attempted} failed in {name}"
