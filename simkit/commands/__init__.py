"""CLI command groups, one module each (see simkit.cli)."""
