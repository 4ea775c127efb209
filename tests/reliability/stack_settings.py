"""Settings of the private stacks the reliability tests start (server, workers, commands).

The production settings with short processing times, so the worker-kill and poison-report tests
need no long waits: a task's soft and hard time limits of 4 s and 5 s and a lease of 6 s (instead
of 120 s, 180 s and 240 s); a claimed upload whose worker died may be taken again 6 s after its
claim. They are set as the TOPOWEB_* variables (unless a test sets them) before the production
settings read and check them. Everything else comes from the variables the tests set (private
database, private Redis, DEBUG off).
"""

import os

os.environ.setdefault("TOPOWEB_TASK_SOFT_TIME_LIMIT", "4")
os.environ.setdefault("TOPOWEB_TASK_TIME_LIMIT", "5")
os.environ.setdefault("TOPOWEB_PROCESSING_LEASE_SECONDS", "6")

from topoweb.settings import *  # noqa: E402,F401,F403
