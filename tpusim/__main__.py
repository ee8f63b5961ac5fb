"""``python -m tpusim``: the same as the ``tpusim`` command."""

import sys

from tpusim.cli import main

sys.exit(main())
