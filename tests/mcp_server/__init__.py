"""Tests of vnc_use.mcp_server."""
