"""``python -m vnc_use.cli``: the same as the ``vnc-use`` command."""

import sys

from vnc_use.cli import main

sys.exit(main())
