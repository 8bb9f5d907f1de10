"""Runs as durable DBOS workflows over PostgreSQL (``corral[dbos]``).

A drive of a run (its start, or one resume) is one DBOS workflow whose effects (tool and
model calls, the clock, ids, sleeps, and the few reads a run makes of the world) are DBOS
steps, through the ordinary effects boundary: there is no second path through the layers.
``client.RunQueue`` enqueues drives; ``worker.run_worker`` is one worker process.

Nothing here is imported by ``corral --help`` or by ``corral`` itself: DBOS is heavy.
"""
