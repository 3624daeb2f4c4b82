"""`python -m personalized_rewardbench ...` (used by `accelerate launch -m`) is `prbench ...`."""

import sys

from personalized_rewardbench.cli import main

sys.exit(main())
