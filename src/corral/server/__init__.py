"""``corral serve``: the HTTP API over the same store as the CLI (``corral[server]``).

FastAPI, uvicorn and sse-starlette are imported by the modules of this package only, never
by ``corral`` itself: ``import corral`` and ``corral --help`` do not need the extra.
``corral.server.app.create_app`` builds the app.
"""
