"""``corral serve``: the HTTP API, its live streams and the dashboard (``corral[server]``)."""
