"""Parley: a self-hostable voice conversation service."""

__version__ = "0.1.0"
