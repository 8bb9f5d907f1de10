"""How long a stopping server waits for its runs: the defaults the app and ``corral serve`` share.

This module imports nothing, so ``corral serve --help`` shows them without loading the
server extra.
"""

SHUTDOWN_GRACE_S = 10.0
"""How long a stopping server waits for runs in flight before stopping them (resumable)."""
STOP_S = 10.0
"""How long a stopping server lets each run it stopped store what it did (``Hub.close``)."""
HURRIED_S = 1.0
"""How long runs stopped in a hurry (``Hub.hurry``: a second Ctrl-C) may take to store."""
