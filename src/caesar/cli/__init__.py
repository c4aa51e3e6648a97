"""The `caesar` command line: `main.py` (the entry point, registers every subcommand),
`common.py` (what the commands share), `data.py` and `memory.py` (commands in their own
modules)."""
