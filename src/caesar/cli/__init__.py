"""The `caesar` command line: `main.py` (the entry point, registers every subcommand),
`common.py` (what the commands share), `data.py`, `memory.py`, `conversations.py`,
`mcp_command.py` and `people.py` (commands in their own modules)."""
