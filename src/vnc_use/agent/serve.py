# compat-alias: the factory moved to vnc_use.runs.serve; users' langgraph.json names this path
from vnc_use.runs.serve import SPEC_NAMESPACE, make_graph

__all__ = ["SPEC_NAMESPACE", "make_graph"]
