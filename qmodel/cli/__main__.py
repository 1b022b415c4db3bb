"""``python -m qmodel.cli``: the ``qmodel`` command."""

import sys

from .command import main

sys.exit(main())
