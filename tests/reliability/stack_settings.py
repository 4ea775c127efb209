"""Settings of the private stacks the reliability tests start (server, workers, commands).

The production settings, with an orphaned ``processing`` upload presumed dead after 3 s instead of
10 minutes, so the worker-kill test needs no long wait. Everything else comes from the TOPOWEB_*
variables the tests set (private database, private Redis, DEBUG off).
"""

from topoweb.settings import *  # noqa: F401,F403

PROCESSING_STALE_SECONDS = 3
