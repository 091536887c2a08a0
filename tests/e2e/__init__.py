"""Tests that run the whole agent through a vendor's SDK on a real desktop."""
