"""One module per framework for ``benchmarks/overhead.py``: the same 5-step task in each.

The task is s1 -> (s2 || s3) -> s4 -> s5 with thin tools (``common.fetch``,
``common.combine``). Each module has ``make(latency_s)``, an async callable that runs one
task and returns s5's value (``common.RESULT``), and ``durable(db)``, the same on a SQLite file with
``synchronous=OFF``. Only the module of the framework being measured is imported, so a
framework that is not installed costs nothing to the others.
"""
