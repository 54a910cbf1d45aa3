"""A terminal tree watcher, in the spirit of py_trees_ros' ``py-trees-tree-watcher``.

Two sources, one picture (:func:`erobs_bt.viz.model.fold_tree`), drawn with rich:

* ROS (:func:`erobs_bt.ros.client.watch.watch_ros`): the node's latched ``~/tree_snapshot`` and
  ``~/execution_state`` topics, made a picture here by :func:`picture_from_ros` (this module
  imports nothing of ROS: the subscriptions are in :mod:`erobs_bt.ros.client.watch`).
* the live web view (:func:`watch_url`): long-polls its ``/api/state`` JSON, so the
  watcher works without ROS (``erobs-bt run --view`` in one terminal, ``erobs-bt watch
  --url …`` in another).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from erobs_bt.terminal import state_style
from erobs_bt.viz.model import fold_tree, nest
from erobs_bt.wording import count

_ICON = {"RUNNING": "●", "SUCCESS": "✓", "FAILURE": "✗", "INVALID": "·"}
_STYLE = {"RUNNING": "bold yellow", "SUCCESS": "green", "FAILURE": "bold red", "INVALID": "dim"}


def _status_text(status: str, text: str, *, bold: bool = False) -> Text:
    style = _STYLE.get(status, "")
    line = Text(f"{_ICON.get(status, '?')} ", style=style)
    line.append(text, style=f"{style} bold" if bold and "bold" not in style else style)
    return line


def _node_tree(parent: Tree, node: Mapping[str, Any]) -> None:
    label = _status_text(str(node.get("status", "")), str(node.get("name", "")))
    if node.get("message"):
        label.append(f"  {node['message']}", style="italic dim")
    branch = parent.add(label)
    for child in node.get("children", ()):
        _node_tree(branch, child)


def _unit_label(entry: Mapping[str, Any]) -> Text:
    label = _status_text(str(entry["status"]), str(entry["name"]), bold=bool(entry.get("current")))
    if entry.get("current"):
        label.append("  ◀ current", style="bold magenta")
    if entry.get("cache"):
        label.append(f"  [{entry['cache']}]", style="cyan")
    seconds = entry.get("seconds") or {}
    if seconds:
        label.append("  " + ", ".join(f"{k} {float(v):.2f} s" for k, v in seconds.items()), style="dim")
    if entry.get("error"):
        label.append(f"  {entry['error']}", style="red")
    return label


def tree_renderable(tree: Mapping[str, Any]) -> Tree:
    """The folded tree (``fold_tree`` output) as a rich Tree: the current, running and
    failed units with their subtrees, every other unit or fold on one line."""
    root = tree["root"]
    out = Tree(
        _status_text(str(root["status"]), f"{root['name']} ({count(int(tree['total_units']), 'unit')})")
    )
    for entry in tree["entries"]:
        kind = entry["kind"]
        if kind == "unit":
            boundary = entry.get("boundary")
            if boundary and boundary.get("status") == "RUNNING":
                waiting = _status_text(
                    "RUNNING", f"{boundary['name']}: {boundary.get('message') or 'waiting'}"
                )
                out.add(waiting)
            branch = out.add(_unit_label(entry))
            if entry.get("open"):
                for child in entry.get("children", ()):
                    _node_tree(branch, child)
        elif kind == "fold":
            span = (
                f"unit {entry['first']}"
                if entry["first"] == entry["last"]
                else f"units {entry['first']}–{entry['last']}"
            )
            words = {"done": "succeeded", "pending": "pending", "mixed": ""}[entry["state"]]
            status = {"done": "SUCCESS", "pending": "INVALID", "mixed": "RUNNING"}[entry["state"]]
            out.add(_status_text(status, f"{span} {words} ({len(entry['units'])})".replace("  ", " ")))
        else:
            out.add(_status_text(str(entry.get("status", "")), str(entry.get("name", ""))))
    return out


def render_picture(picture: Mapping[str, Any], *, source: str) -> RenderableType:
    """A picture (web view JSON or :func:`picture_from_ros`) as a header and the tree.

    Args:
        picture: ``state``, ``goal``, ``feedback``, ``last_error``, ``result``, ``tree``
            (any may be missing or empty).
        source: what is watched (a URL or a ROS node), shown in the header.
    """
    header = Table.grid(padding=(0, 1))
    header.add_column(style="dim")
    header.add_column()
    state = str(picture.get("state", ""))
    header.add_row("watching", source)
    state_text = Text(state or "?", style=state_style(state))
    if picture.get("state_message"):
        state_text.append(f"  {picture['state_message']}", style="dim")
    header.add_row("state", state_text)
    goal = picture.get("goal") or {}
    if goal.get("id"):
        header.add_row("goal", str(goal["id"]))
    feedback = picture.get("feedback") or {}
    if feedback:
        percent = feedback.get("progress_percentage")
        header.add_row(
            "progress",
            (f"{float(percent):.0f} % — " if percent is not None else "")
            + f"step {feedback.get('current_step', 0)}/{feedback.get('total_steps', 0)}, "
            f"unit {feedback.get('unit_index', 0)}: {feedback.get('current_action', '')}"
            + (f" [cache {feedback['cache_status']}]" if feedback.get("cache_status") else ""),
        )
        if feedback.get("status_message"):
            header.add_row("doing", str(feedback["status_message"]))
    result = picture.get("result")
    if result:
        style = "green" if result.get("status") == "SUCCEEDED" else "bold red"
        header.add_row(
            "result",
            Text(
                f"{result.get('status')} {result.get('completed_steps')}/{result.get('total_steps')} steps",
                style=style,
            ),
        )
    if picture.get("last_error"):
        header.add_row("last error", Text(str(picture["last_error"]), style="bold red"))
    tree = picture.get("tree")
    body: RenderableType = tree_renderable(tree) if tree else Text("no tree yet (no goal)", style="dim")
    return Group(header, Text(""), body)


# -- the web view ----------------------------------------------------------------------------


def fetch_picture(
    url: str, *, after: int | None, wait: float, timeout: float, token: str | None = None
) -> dict[str, Any]:
    """One ``GET /api/state`` of a live view at ``url`` (``http://127.0.0.1:PORT/``).

    Args:
        url: the live view's address (without a ``?token=`` query: see :func:`split_token`).
        after: long-poll: answer once the picture's version differs from this one.
        wait: long-poll wait [s].
        timeout: socket timeout [s].
        token: the view's access token (``run --view --host ...`` prints it), sent as
            ``Authorization: Bearer``; ``None`` for a loopback view without one.

    Raises:
        PermissionError: the view refused the request (401: it needs a token; 403: wrong token).
        urllib.error.URLError, OSError: the view cannot be reached.
        ValueError: the answer is not JSON.
    """
    query = f"?after={after}&wait={wait:g}" if after is not None else ""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url.rstrip("/") + "/api/state" + query, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return dict(json.loads(response.read().decode("utf-8")))
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            words = "the view needs an access token: pass --token (it was printed with the URL)"
            raise PermissionError(words) from exc
        if exc.code == 403:
            raise PermissionError("the view refused the access token (or this Host): check --token") from exc
        raise


def split_token(url: str) -> tuple[str, str | None]:
    """``(url without its token, token)`` of a URL as ``run --view --host`` prints it
    (``http://HOST:PORT/?token=...``); the token is ``None`` when the URL has none."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    token = next((value for key, value in query if key == "token"), None)
    rest = urllib.parse.urlencode([(key, value) for key, value in query if key != "token"])
    return urllib.parse.urlunsplit(parts._replace(query=rest)), token


def watch_url(
    url: str,
    *,
    console: Console,
    once: bool,
    stop: threading.Event | None = None,
    wait: float = 10.0,
    token: str | None = None,
) -> int:
    """Draw the live view at ``url`` until interrupted (or once).

    Args:
        url: the live view's address; a ``?token=`` in it is used as the access token
            (and never printed).
        console: where to draw.
        once: print one picture and return.
        stop: set it to end the watch (tests, embedding).
        wait: long-poll wait per request [s].
        token: the access token (overrides one in ``url``).

    Returns:
        0; 1 when ``once`` and the view cannot be reached; 2 when the view refuses the token.
    """
    from rich.live import Live

    url, in_url = split_token(url)
    token = token or in_url
    if token is not None and not (token.isascii() and token.isprintable()):
        # An HTTP header cannot carry it (newlines, NUL, non-ASCII): say so, do not retry.
        console.print(f"[bold red]{url}:[/] the access token must be printable ASCII", highlight=False)
        return 2
    stop = stop or threading.Event()
    if once:
        try:
            picture = fetch_picture(url, after=None, wait=0, timeout=10, token=token)
        except PermissionError as exc:
            console.print(f"[bold red]{url}:[/] {exc}", highlight=False)
            return 2
        except (OSError, ValueError) as exc:
            console.print(f"[bold red]cannot reach the live view at {url}:[/] {exc}", highlight=False)
            return 1
        console.print(render_picture(picture, source=url))
        return 0
    version: int | None = None
    with Live(Text(f"connecting to {url} …"), console=console, refresh_per_second=8) as live:
        while not stop.is_set():
            try:
                picture = fetch_picture(url, after=version, wait=wait, timeout=wait + 5, token=token)
            except PermissionError as exc:
                live.update(Text(f"{url}: {exc}", style="bold red"))
                return 2
            except (OSError, ValueError) as exc:
                live.update(Text(f"{url}: {exc} — retrying", style="bold red"))
                stop.wait(1.0)
                continue
            if picture.get("version") != version:
                version = picture.get("version")
                live.update(render_picture(picture, source=url))
    return 0


# -- ROS ----------------------------------------------------------------------------------------


def picture_from_ros(snapshot: Any, state: Any | None) -> dict[str, Any]:
    """A picture from a ``TreeSnapshot`` message and the latest ``ExecutionState``.

    Args:
        snapshot: ``erobs_bt_interfaces/msg/TreeSnapshot`` (``goal_id``, ``final``,
            ``behaviours`` with ``id``, ``parent_id``, ``name``, ``type``, ``status``,
            ``message``), or ``None``.
        state: ``erobs_bt_interfaces/msg/ExecutionState`` or ``None``.

    Returns:
        The picture :func:`render_picture` draws (no per-unit cache or timing notes:
        the topics do not carry them).
    """
    picture: dict[str, Any] = {"state": "", "goal": {}, "tree": None}
    if state is not None:
        picture["state"] = state.state
        picture["state_message"] = state.message
        if state.total_steps:
            picture["feedback"] = {
                "current_step": state.current_step,
                "total_steps": state.total_steps,
                "unit_index": state.unit_index,
                "current_action": "",
            }
    if snapshot is not None:
        picture["goal"] = {"id": snapshot.goal_id, "final": bool(snapshot.final)}
        root = nest(
            {
                "id": b.id,
                "parent_id": b.parent_id,
                "name": b.name,
                "type": b.type,
                "status": b.status,
                "message": b.message,
            }
            for b in snapshot.behaviours
        )
        picture["tree"] = fold_tree(root, notes={}) if root is not None else None
    return picture
