"""Build hook: the wheel carries the Hub artifacts as package data under `personalized_rewardbench/_bundled/`.

The top-level `metric/personalized_accuracy/`, `loading_script/`, `dataset_card/` and `space/` stay their
single source; `build_py` copies them into the build tree, where `personalized_rewardbench.resources`
finds them first. An editable install reads them from the checkout instead. Everything else is in
pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = ("metric/personalized_accuracy", "loading_script", "dataset_card", "space")
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildPyWithResources(build_py):
    """`build_py`, then copy the BUNDLED folders into `<build>/personalized_rewardbench/_bundled/`."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's folders in place
            return
        target = Path(self.build_lib) / "personalized_rewardbench" / "_bundled"
        for relative in BUNDLED:
            destination = target / relative
            shutil.rmtree(destination, ignore_errors=True)
            shutil.copytree(ROOT / relative, destination, ignore=_SKIP)


setup(cmdclass={"build_py": BuildPyWithResources})
