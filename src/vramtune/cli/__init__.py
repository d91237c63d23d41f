"""The typer CLI: thin wrappers over the pure core, one module per command."""
