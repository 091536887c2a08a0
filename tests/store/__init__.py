"""Tests of vnc_use.store."""
