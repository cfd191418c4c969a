"""Backends: how a hat runs."""
