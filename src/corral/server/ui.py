"""The dashboard: static pages under ``/ui`` that read the JSON API in the browser.

The pages ship inside the package (``corral/server/ui/``) with ECharts vendored beside
them, so the dashboard works with no network and no CDN. They hold no data: every figure
comes from the API with the bearer token the browser keeps, which is why ``/ui`` itself
needs none. Data is only ever written into the page as text, and a strict
Content-Security-Policy stops any script the pages do not ship, so a hostile run cannot
run code in the browser of the person reading it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

UI_DIR = Path(__file__).resolve().parent / "ui"
"""The static files of the dashboard, shipped as package data."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""Headers on every dashboard file: only the shipped scripts run, and nothing leaks out."""


def mount_ui(app: FastAPI) -> None:
    """Serve the dashboard under ``/ui`` (``/ui/`` is its index page)."""
    from starlette.responses import RedirectResponse, Response
    from starlette.staticfiles import StaticFiles
    from starlette.types import Scope

    class DashboardFiles(StaticFiles):
        """Static files with the dashboard's security headers on every answer."""

        async def get_response(self, path: str, scope: Scope) -> Response:
            response = await super().get_response(path, scope)
            response.headers.update(SECURITY_HEADERS)
            return response

    async def to_index() -> RedirectResponse:
        return RedirectResponse("ui/", status_code=307)  # relative: works under a prefix

    app.add_api_route("/ui", to_index, methods=["GET"], include_in_schema=False)
    app.mount("/ui", DashboardFiles(directory=UI_DIR, html=True), name="ui")
