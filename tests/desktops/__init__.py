"""Tests of vnc_use.desktops."""
