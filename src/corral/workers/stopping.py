"""How long a stopping worker waits: the defaults ``Worker`` and ``corral worker`` share.

This module imports nothing, so ``corral worker --help`` shows them without loading DBOS.
"""

SHUTDOWN_GRACE_S = 10.0
"""How long the drives in flight get to end (DBOS's workflow completion timeout, in whole
seconds: rounded up); those that do not stay pending, to be recovered."""
STOP_S = 10.0
"""Then how long the process's threads get to end before it exits without them."""
STOP_MARGIN_S = 10.0
"""What a whole stop may take beyond the two: DBOS's and the store's own closing. Past
grace + stop timeout + this from the stop signal, the process ends, whatever still runs."""
