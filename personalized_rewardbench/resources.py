"""Where the library finds the Hub artifacts that live outside it: the metric module, the datasets builder,
the dataset-card template and the Space face.

The top-level folders `metric/`, `loading_script/`, `dataset_card/` and `space/` are their single source.
A checkout (editable install) reads them in place; a wheel carries copies under
`personalized_rewardbench/_bundled/`, mapped in at build time, so a plain install works anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DIR = PACKAGE_DIR / "_bundled"
CHECKOUT_DIR = PACKAGE_DIR.parent


def resource(relative: str) -> Path:
    """`relative` (e.g. "metric/personalized_accuracy") from the wheel's bundle, else from the checkout."""
    bundled = BUNDLED_DIR / relative
    return bundled if bundled.exists() else CHECKOUT_DIR / relative


def metric_dir() -> Path:
    """The `personalized_accuracy` evaluate module: `$PRBENCH_METRIC_DIR` if set (e.g. a Space bundle's copy)."""
    return Path(os.environ.get("PRBENCH_METRIC_DIR") or resource("metric/personalized_accuracy"))


def loading_script() -> Path:
    """The datasets builder shipped with every release."""
    return resource("loading_script/personalized_rewardbench.py")


def card_template() -> Path:
    """The dataset card template."""
    return resource("dataset_card/README.md")
