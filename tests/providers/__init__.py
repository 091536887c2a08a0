"""Tests of vnc_use.providers."""
