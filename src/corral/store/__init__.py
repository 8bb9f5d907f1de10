"""Where runs are kept: their events, handoff packets, leases and sessions.

One contract (``Store``) with two implementations: ``SqlStore`` (SQLite or PostgreSQL)
for durable runs and ``MemoryStore`` for tests and benchmarks. Database failures become
store errors with stable codes that say which run they hit.
"""
