"""One module per framework for ``benchmarks/overhead.py``: the same 5-step task in each.

The task is s1 -> (s2 || s3) -> s4 -> s5 with thin tools (``common.fetch``,
``common.combine``). Each module has ``make(latency_s)``, an async callable that runs one
task and returns s5's value (``common.RESULT``), and ``durable(db)``, the same on a SQLite
file with ``synchronous=OFF``. Those in ``overhead.CHAINS`` also take ``make(latency_s,
steps)``: a chain of that many calls, each adding 1 to the one before, which returns
``RESULT`` once ``common.checked_chain`` found it ended at ``steps``. Only the module of
the framework being measured is imported, so a framework that is not installed costs
nothing to the others.
"""
