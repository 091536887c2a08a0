"""The record of a run: its folder (events, screenshots, steps), the list of runs, the report."""
