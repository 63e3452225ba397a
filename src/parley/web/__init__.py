"""The dashboard (API.md section 10): server-rendered pages over the same services as the
REST API. `install_dashboard` is the one entry point; only `parley.app` calls it."""

from parley.web.routes import install_dashboard

__all__ = ["install_dashboard"]
