"""Tests of vnc_use.testing."""
