"""Run `space/app.py` in ZeroGPU mode on a machine without a GPU (the zero-mode smoke test's Space process).

Start it with SPACES_ZERO_GPU=true and SPACES_ZERO_DEVICE_API_URL pointing at `fake_zero_api.FakeZeroApi`.
The `spaces` package then works as on a ZeroGPU Space: it patches torch at import, reports start-up, and runs
each @spaces.GPU call through /schedule, a forked worker (arguments and result pickled across), /allow from
the worker and /release. Only what needs a real GPU is stubbed, here and nowhere else:
- the worker's CUDA start (`spaces.zero.torch.init`, which runs a tensor `.cuda()`) and its copy of the
  preloaded tensors onto the GPU (`spaces.zero.torch.move`, which ends in a CUDA synchronize);
- the device our scorers pick: on ZeroGPU `torch.cuda.is_available()` is patched to say True, so `auto`
  would pick CUDA; here models load on the CPU and run on the CPU in the worker.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

# what `spaces` reads from a CUDA build of torch at import, absent from the CPU build
torch.version.cuda = torch.version.cuda or "12.8"
if not hasattr(torch._C, "_cuda_init"):

    def _cuda_init():
        raise RuntimeError("this torch build has no CUDA")

    torch._C._cuda_init = _cuda_init


def _is_in_bad_fork() -> bool:  # the CPU build's is a lambda, which spaces cannot send to its probe process
    return False


torch.cuda._is_in_bad_fork = _is_in_bad_fork

import spaces  # noqa: E402  (before any model, as in app.py: it patches torch)
import spaces.zero.torch as zero_torch  # noqa: E402

assert spaces.config.Config.zero_gpu, "start this with SPACES_ZERO_GPU=true"

zero_torch.init = lambda nvidia_uuid: None
zero_torch.move = lambda callback=None: None

from personalized_rewardbench.scoring import model_loading  # noqa: E402

model_loading.select_device = lambda requested="auto": torch.device("cpu")

runpy.run_path(str(REPO / "space" / "app.py"), run_name="__main__")
