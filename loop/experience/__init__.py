"""experience."""
