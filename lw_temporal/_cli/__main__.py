"""``python -m lw_temporal._cli``: the console script without installing it."""

import sys

from . import main

sys.exit(main())
