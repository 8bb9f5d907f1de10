"""What an agent can do: ``@tool`` functions, their policies, and how they are called.

A typed Python function becomes a ``ToolSpec`` whose signature is its input schema and
whose return annotation is its output schema. ``invoke`` calls it through the effects
boundary with a timeout and retries, and always ends in a ``ToolResult`` envelope. Also
the registry, the loader for an agent's ``tools.py``, and ``Sensitive`` fields.
"""
