"""Tests of vnc_use.agent."""
