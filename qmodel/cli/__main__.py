"""``python -m qmodel.cli``: the ``qmodel`` command."""

import sys

from .main import main

sys.exit(main())
