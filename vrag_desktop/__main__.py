"""``python -m vrag_desktop`` = the ``vrag-desktop`` command."""

import sys

from vrag_desktop.cli.main import main

sys.exit(main())
