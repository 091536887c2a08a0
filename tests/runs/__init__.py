"""Tests of vnc_use.runs."""
