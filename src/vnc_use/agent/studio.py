# compat-alias: the drawable graph moved up to vnc_use.runs.studio; old imports keep working
from vnc_use.runs.studio import graph

__all__ = ["graph"]
