"""The HTTP edge: JSON API, OpenAI-compatible endpoint, dashboard."""

from caesar.api.app import create_app

__all__ = ["create_app"]
