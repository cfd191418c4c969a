"""CLI commands, one module per command group (each has ``register``)."""
