"""The web console (``vnc-use console``): start runs, watch them live, approve or deny in the
page, and every run's history.

A front door like the CLI: it renders pages from the run folders the CLI reads and acts on runs
only through legs that run the executor's verbs (:mod:`vnc_use.console.legs`). Built from
Starlette under uvicorn, server-rendered HTML, a little plain JavaScript and noVNC from
Debian's package. See ``docs/console.md``.
"""
