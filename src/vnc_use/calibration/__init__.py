"""``vnc-use calibrate``: a one-minute check that a model clicks where it means.

A calibration window (:mod:`.window`) shows a dozen labelled targets of different sizes,
spread to the screen's corners and edges (:mod:`.layout`); the model is asked to click each by
its label (:mod:`.session`); the clicks are compared with the targets and diagnosed -- fine,
off by a scale, off by an offset, not clicking -- and, for an OpenAI-compatible server, the
model's own answers are re-read under every other dialect to name the one that fits
(:mod:`.analysis`).
"""

from __future__ import annotations

from vnc_use.calibration.analysis import Diagnosis, diagnose
from vnc_use.calibration.layout import Target, layout

__all__ = ["Diagnosis", "Target", "diagnose", "layout"]
