"""Tests of vnc_use.record."""
