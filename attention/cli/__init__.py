"""The command line `python -m attention` (its entry point is `attention/__main__.py`): `parser` declares
the subcommands and their options, `commands` runs them."""
