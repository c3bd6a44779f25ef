"""Command-line interface (typer + rich). The only layer that prints or exits."""
