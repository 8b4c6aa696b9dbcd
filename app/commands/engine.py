"""CLI commands of the engine (`longdoc generate`). Owned by the engine; registered by app.cli."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:  # filled in by the engine work
    return None
