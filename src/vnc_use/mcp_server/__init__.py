"""``vnc-use mcp``: the Model Context Protocol server over a VNC desktop.

- :mod:`vnc_use.mcp_server.session` -- the desktop the low-level tools act on, and the session
  run folder that journals every action like an agent step;
- :mod:`vnc_use.mcp_server.runs` -- ``run_task`` / ``approve_run`` / ``deny_run`` on the agent;
- :mod:`vnc_use.mcp_server.server` -- the tools on the official MCP SDK (its only importer),
  stdio and streamable HTTP with a bearer token.
"""
