"""`python -m replog ...`: the `replog` command (`replog.cli.main`), for a checkout or an
environment without the console script, and for `python -X importtime -m replog ...`."""

import sys

from replog.cli.main import main

sys.exit(main())
