# compat-alias: VncUseAgent moved up to vnc_use.runs.agent; old imports keep working
from vnc_use.runs.agent import CHECKPOINT_DB, AgentSettings, VncUseAgent

__all__ = ["CHECKPOINT_DB", "AgentSettings", "VncUseAgent"]
