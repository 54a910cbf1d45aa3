"""Run history: the past runs' logs listed and replayed in the operator's console.

Both the CLI (``erobs-bt run``: :class:`~erobs_bt.viz.runlog.RunLogWriter`, one file per run)
and the node (:class:`~erobs_bt.ros.node.runlogs.NodeRunLogs`, one file per goal) write JSON
Lines run logs, by default into :func:`~erobs_bt.viz.runlog.default_log_dir`. A *run* here is
one such file; it holds one goal or several (``run --repeat``). :class:`RunIndex` lists the
``*.jsonl`` files of its folders with a summary of each goal, read once per file version
(path, size, modification time).

Routes (:func:`history_routes`, included by the console's app; read-only):

* ``GET /history`` — the page (``static/history.html`` + ``history.js``): the list, and a
  replay of one goal over a timeline scrubber: the tree's statuses from the ``tree`` /
  ``tree_status`` records, the arm in the 3D view from ``joint_state`` records, the tool from
  ``tool`` records, a previewed trajectory as the ghost (``trajectory`` records); see
  :mod:`erobs_bt.viz.runlog` for the record kinds;
* ``GET /api/runs`` — ``{"folders": [...], "runs": [summary, ...]}``, newest first;
* ``GET /api/runs/{id}`` — ``{"id", "file", "goals": [...], "records": [...]}`` (every
  record of the file; ``?goal=goal-2`` keeps one goal's). 404 for an unknown id, 422 for a
  file that is not a run log (the message names the file and line).

A summary is ``{"id", "file", "name", "size", "modified" (epoch s), "started", "goals":
[{"goal_id", "mode", "status", "error", "started", "finished" (epoch s or null),
"units", "total_steps", "completed_steps", "motion" (has joint states), "tree" (has a
tree)}]}``; ``status`` is the goal's result (``SUCCEEDED``, ``ABORTED``, ``CANCELED``),
``REJECTED`` for a script refused at submission, ``RUNNING`` for a goal without an end
(still running, or the process died).

The console's app (:mod:`erobs_bt.viz.web`) serves these routes; its
:func:`~erobs_bt.viz.web.serve_log` is ``erobs-bt log FILE --view``: the history page on
loopback, opened on that file, until Ctrl-C. This module imports nothing of the console.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from erobs_bt.viz.runlog import default_log_dir, read_run_log


@dataclass(frozen=True)
class _Cached:
    key: tuple[int, int]  # (size, mtime_ns)
    summary: dict[str, Any]


def summarize(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-goal summaries of a run log's records, in the order the goals appear."""
    goals: dict[str, dict[str, Any]] = {}
    for record in records:
        goal_id = str(record.get("goal_id") or "")
        if not goal_id:
            continue
        goal = goals.setdefault(
            goal_id,
            {
                "goal_id": goal_id,
                "mode": "",
                "status": "RUNNING",
                "error": "",
                "started": record["t"],
                "finished": None,
                "units": 0,
                "total_steps": 0,
                "completed_steps": 0,
                "motion": False,
                "tree": False,
            },
        )
        event = record.get("event")
        if event == "goal_started":
            goal.update(
                mode=record.get("mode", ""),
                units=record.get("units", 0),
                total_steps=record.get("total_steps", 0),
                started=record["t"],
            )
        elif event == "goal_finished":
            goal.update(
                status=record.get("status", ""),
                error=record.get("error", "") or "",
                finished=record["t"],
                completed_steps=record.get("completed_steps", 0),
                total_steps=record.get("total_steps", goal["total_steps"]),
            )
        elif event == "rejected_script":
            goal.update(status="REJECTED", error=str(record.get("error", "")), finished=record["t"])
        elif event == "joint_state":
            goal["motion"] = True
        elif event == "tree":
            goal["tree"] = True
    return list(goals.values())


class RunIndex:
    """The run logs of some folders (see the module docstring).

    Thread-safe. A file that cannot be read or is not a run log is listed with an
    ``"error"`` instead of goals.

    Args:
        folders: where to look (``None``: :func:`~erobs_bt.viz.runlog.default_log_dir`);
            missing folders are skipped.
        files: single log files to list as well (``erobs-bt log FILE --view``).
    """

    def __init__(self, folders: Sequence[Path] | None = None, *, files: Sequence[Path] = ()) -> None:
        self.folders = [
            Path(f).expanduser() for f in (folders if folders is not None else [default_log_dir()])
        ]
        self.files = [Path(f).expanduser().resolve() for f in files]
        self._lock = threading.Lock()
        self._cache: dict[Path, _Cached] = {}
        self._ids: dict[str, Path] = {}

    def _paths(self) -> list[Path]:
        seen: dict[Path, None] = {}
        for path in self.files:
            seen[path] = None
        for folder in self.folders:
            if folder.is_dir():
                for path in folder.glob("*.jsonl"):
                    seen[path.resolve()] = None
        return list(seen)

    def id_of(self, path: Path) -> str:
        """The id of ``path`` in this index (its file name without ``.jsonl``, made unique)."""
        with self._lock:
            for run_id, known in self._ids.items():
                if known == path:
                    return run_id
            run_id, n = path.stem, 1
            while run_id in self._ids:
                n += 1
                run_id = f"{path.stem}~{n}"
            self._ids[run_id] = path
            return run_id

    def _summary(self, path: Path) -> dict[str, Any] | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None and cached.key == key:
            return cached.summary
        summary: dict[str, Any] = {
            "id": self.id_of(path),
            "file": str(path),
            "name": path.name,
            "size": stat.st_size,
            "modified": stat.st_mtime,
        }
        try:
            goals = summarize(read_run_log(path))
            summary["goals"] = goals
            summary["started"] = goals[0]["started"] if goals else stat.st_mtime
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            summary.update(goals=[], started=stat.st_mtime, error=str(exc))
        with self._lock:
            self._cache[path] = _Cached(key, summary)
        return summary

    def runs(self) -> list[dict[str, Any]]:
        """Summaries of every run log, newest first (by the first record's time)."""
        summaries = [s for s in (self._summary(p) for p in self._paths()) if s is not None]
        return sorted(summaries, key=lambda s: s["started"], reverse=True)

    def path(self, run_id: str) -> Path:
        """The file of ``run_id``.

        Raises:
            KeyError: no listed run has that id.
        """
        with self._lock:
            known = self._ids.get(run_id)
        if known is None:
            self.runs()  # new files since the last listing
            with self._lock:
                known = self._ids.get(run_id)
        if known is None or not known.is_file():
            raise KeyError(run_id)
        return known

    def run(self, run_id: str, goal_id: str | None = None) -> dict[str, Any]:
        """``{"id", "file", "goals", "records"}`` of one run (``goal_id``: that goal's records).

        Raises:
            KeyError: unknown id.
            ValueError: the file is not a run log (message names the file and line).
            OSError: the file cannot be read.
        """
        path = self.path(run_id)
        # The node writes its replay records at once and the orchestrator's events in batches
        # (erobs_bt.ros.node.runlogs), so file order is not time order: sort by "t" (stable).
        records = sorted(read_run_log(path), key=lambda r: r.get("t") or 0.0)
        goals = summarize(records)
        if goal_id is not None:
            records = [r for r in records if r.get("goal_id") == goal_id]
        return {"id": run_id, "file": str(path), "goals": goals, "records": records}


def history_routes(index: RunIndex | None = None) -> list[Any]:
    """The Starlette routes of the history (see the module docstring).

    Args:
        index: the runs to offer (default: a :class:`RunIndex` of the default log folder).

    Returns:
        Routes for the app's route list: ``/history``, ``/static/history.js`` and ``.css``,
        ``/api/runs``, ``/api/runs/{id}``.
    """
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Route

    from erobs_bt.viz.scene import static_dir

    runs = index if index is not None else RunIndex()

    async def page(request: Request) -> Response:
        return FileResponse(static_dir() / "history.html", media_type="text/html; charset=utf-8")

    async def script(request: Request) -> Response:
        return FileResponse(static_dir() / "history.js", media_type="text/javascript")

    async def style(request: Request) -> Response:
        return FileResponse(static_dir() / "history.css", media_type="text/css")

    async def listing(request: Request) -> Response:
        summaries = await run_in_threadpool(runs.runs)
        return JSONResponse({"folders": [str(f) for f in runs.folders], "runs": summaries})

    async def one(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        goal = request.query_params.get("goal") or None
        try:
            body = await run_in_threadpool(runs.run, run_id, goal)
        except KeyError:
            return JSONResponse({"error": f"no such run: {run_id}"}, status_code=404)
        except (ValueError, UnicodeDecodeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        except OSError as exc:
            return JSONResponse({"error": f"{run_id}: {exc}"}, status_code=500)
        return JSONResponse(body)

    return [
        Route("/history", page),
        Route("/static/history.js", script),
        Route("/static/history.css", style),
        Route("/api/runs", listing),
        Route("/api/runs/{run_id}", one),
    ]
