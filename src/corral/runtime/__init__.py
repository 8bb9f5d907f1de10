"""Running a run: the loop, the step scheduler, the event journal, ownership and replay.

``Runtime`` is the entry point (start, resume, read back). Each run is driven by a
``RunLoop`` that only emits events through its ``Journal``; its state is the fold of
those events, so a paused or crashed run resumes by folding its log. The layers it calls
(intent, routing, planning, decision, tools, verify, reply) never import this package;
the parts inside it see the loop through the protocols in ``view``.
"""
