"""Driving the web console's pages in headless Chromium as a person would: controls found by
their accessible names (the Chromium accessibility tree), a run's status read from the page."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from chromium import Page

__all__ = ["fill", "press", "status_of", "value_of", "wait", "wait_status"]


def wait(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


def _node(page: Page, name: str, role: str | None = None) -> dict[str, Any]:
    for _ in range(50):  # the page may reload meanwhile (a run that ended): look again
        try:
            return _find(page, name, role)
        except AssertionError as exc:
            if "Could not find node" not in str(exc) and "no control named" not in str(exc):
                raise
            time.sleep(0.1)
    return _find(page, name, role)


def _find(page: Page, name: str, role: str | None = None) -> dict[str, Any]:
    page.send("Page.bringToFront")  # a tab in the background lays out nothing: no AX tree
    root = page.send("DOM.getDocument", depth=0)["root"]["nodeId"]
    params: dict[str, Any] = {"nodeId": root, "accessibleName": name}
    if role:
        params["role"] = role
    nodes = [
        n for n in page.send("Accessibility.queryAXTree", **params)["nodes"] if not n.get("ignored")
    ]
    assert nodes, f"no control named {name!r} on the page"
    return nodes[0]


def _call(page: Page, name: str, function: str, role: str | None = None) -> Any:
    node = _node(page, name, role)
    obj = page.send("DOM.resolveNode", backendNodeId=node["backendDOMNodeId"])["object"]
    reply = page.send(
        "Runtime.callFunctionOn",
        objectId=obj["objectId"],
        functionDeclaration=function,
        returnByValue=True,
    )
    return reply["result"].get("value")


def press(page: Page, name: str) -> None:
    """Click the button whose accessible name is ``name``."""
    _call(page, name, "function () { this.click(); }", "button")


def fill(page: Page, name: str, value: str) -> None:
    """Set the text field whose accessible name is ``name``."""
    _call(page, name, f"function () {{ this.value = {json.dumps(value)}; }}", "textbox")


def status_of(page: Page) -> str:
    try:
        return str(page.evaluate("(document.body && document.body.dataset.status) || ''"))
    except AssertionError as exc:  # the page reloads (a run that ended): ask again
        if "navigated" in str(exc) or "context" in str(exc).lower():
            return ""
        raise


def wait_status(page: Page, *statuses: str, timeout: float = 60) -> str:
    return str(
        wait(f"status {statuses}", lambda: status_of(page) in statuses and status_of(page), timeout)
    )


def value_of(page: Page, name: str, role: str | None = None) -> Any:
    """The value of the control whose accessible name is ``name``."""
    return _call(page, name, "function () { return this.value; }", role)
