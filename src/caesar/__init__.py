"""caesar: a self-hosted personal AI assistant server whose memory actually works."""

__version__ = "0.1.0"
