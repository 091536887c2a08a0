"""Tests of vnc_use.evaluation."""
