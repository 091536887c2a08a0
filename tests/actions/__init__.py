"""Tests of vnc_use.actions."""
