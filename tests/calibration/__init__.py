"""Tests of vnc_use.calibration."""
