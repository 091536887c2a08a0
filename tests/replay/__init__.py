"""Tests of vnc_use.replay."""
