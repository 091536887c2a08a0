"""The version of vnc-use, in the lowest layer so that every module may name it (the report,
the CLI's ``--version``, the MCP server's handshake); the package root re-exports it."""

__version__ = "0.1.0"
