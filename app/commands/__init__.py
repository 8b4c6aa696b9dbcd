"""CLI sub-commands, one module per pipeline or subsystem; each exposes `register(app)`."""
