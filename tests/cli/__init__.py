"""Tests of vnc_use.cli."""
