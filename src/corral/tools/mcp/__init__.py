"""Tools served by MCP servers (``mcp_servers:`` in agent.yaml), over the official SDK.

``connection`` keeps one server per agent: started on the first call, restarted after it
dies, stopped at ``Agent.aclose()``. ``results`` turns an MCP answer into a tool result or
a failure with a stable code. ``importer`` lists a server's tools when the agent loads and
makes the chosen ones ordinary ``ToolSpec``s. The ``mcp`` package is imported only by
these modules, and they only when an agent declares a server.
"""
