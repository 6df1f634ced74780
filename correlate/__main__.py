"""Entry point of `python -m correlate`."""

import sys

from correlate.cli import main

sys.exit(main())
