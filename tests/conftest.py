"""Test-wide settings: never touch the network, keep every Hugging Face cache in a temp folder."""

import os
import tempfile

_HF_HOME = tempfile.mkdtemp(prefix="prbench-hf-home-")
os.environ["HF_HOME"] = _HF_HOME
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
