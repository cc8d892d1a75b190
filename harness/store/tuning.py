"""Tuning results in the store (schema version 6; the session's clock since version 10): sessions of
`kbench tune`, every trial they measured, and the best configuration per (tuning key, device).

A *session* tunes one tuned case (:attr:`harness.model.Case.tuning_key`) on one *device*: the GPU
model for cuda cases (``"H100"``), :func:`cpu_device` of the host for the c and opencl targets. A
*trial* is one measured candidate: its knobs and index in the space, its cost (the mean of its
costs, seconds: on the harness's clock the one cost is the median of its samples, see the session's
``clock``) or its error number (:class:`kernels.tuning.MeasureErrorNo`) and message, its
index in the session, when it was measured and on which device. Each trial is written in its own
transaction together with ``best_configs``, which keeps the fastest successful trial of the tuning
key on the device over every session of one clock (the session's ``clock``, schema version 10): an interrupted session leaves what it measured, and a later
session only replaces the best when it beats it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import pandas as pd

from harness import __version__
from harness.errors import StoreError
from harness.model import Case

from .backend import Connection
from .schema import now

__all__ = ["SESSION_STATUSES", "TuningQueries", "cpu_device", "in_space"]

#: states of a tuning session
SESSION_STATUSES = ("running", "done", "failed", "interrupted")


def cpu_device(fingerprint: Mapping[str, Any]) -> str:
    """The device key of the c and opencl targets on a host (``harness.env.fingerprint("cpu")``):
    its CPU model and logical CPU count, e.g. ``"cpu:AMD EPYC 7763 64-Core Processor x2"`` (a
    configuration tuned on one host serves hosts with the same CPU)."""
    return f"cpu:{fingerprint.get('cpu_model') or 'unknown CPU'} x{fingerprint.get('cpu_count') or '?'}"


class TuningQueries:
    """Tuning sessions, trials and best configurations (mixed into :class:`harness.store.Store`,
    which supplies ``_reader``, ``_write`` and ``path``)."""

    path: Any

    def _reader(self) -> Connection:  # pragma: no cover - supplied by Store
        raise NotImplementedError

    def _write(self, what: str) -> AbstractContextManager[Connection]:  # pragma: no cover - Store's
        raise NotImplementedError

    # -- writing ------------------------------------------------------------------------------

    def begin_tuning_session(self, case: Case, *, device: str, tuner: str, n_trial: int, executor: str,
                             space: Sequence[tuple[str, Sequence[Any]]], suite: Any = None,
                             argv: Sequence[str] = (), git_commit: str | None = None,
                             clock: str | None = None) -> int:
        """Record a new tuning session of the tuned ``case`` on ``device`` (state "running").

        Parameters
        ----------
        case : Case
            A tuned case (``case.tuned``); its GPU model is stored with the session.
        device : str
            The GPU model, or :func:`cpu_device` for CPU targets.
        tuner, executor : str
            "xgb" / "random" / "grid"; "local" / "ray".
        n_trial : int
            Trials asked for.
        space : sequence of (knob, values)
            The tuning space (``Suite.space_for(case)``).
        suite
            An object with ``name`` and ``path`` (a :class:`harness.suite.Suite`), or None.
        clock : str, optional
            What timed the trials (``harness.tune.runner.CLOCKS``: "harness" or "time_evaluator");
            None: not known.

        Returns
        -------
        int
            The session id.
        """
        if not case.tuned:
            raise StoreError(f"begin_tuning_session: {case.key} is not a case of a tuned variant")
        row = (str(uuid.uuid4()), now(), "running", str(getattr(suite, "name", "") or ""),
               None if getattr(suite, "path", None) is None else str(suite.path), case.tuning_key,
               case.workload, case.variant, json.dumps(case.param_dict), case.dtype, case.target,
               str(device), case.gpu_model, str(tuner), int(n_trial), str(executor),
               json.dumps([[k, list(v)] for k, v in space]), git_commit, __version__,
               json.dumps(list(argv)))
        # the clock only where known (the column is NULL otherwise, as in sessions older than it)
        extra = ("", "", ()) if clock is None else (", clock", ", ?", (str(clock),))
        with self._write("begin a tuning session") as conn:
            return conn.insert(
                "INSERT INTO tuning_sessions (uuid, started_at, status, suite_name, suite_path, tuning_key,"
                " workload, variant, params, dtype, target, device, gpu_model, tuner, n_trial, executor,"
                f" space, git_commit, kbench_version, argv{extra[0]})"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{extra[1]})",
                row + extra[2])

    def finish_tuning_session(self, session_id: int, status: str) -> None:
        """Mark a session "done", "failed" or "interrupted" and stamp its end."""
        if status not in SESSION_STATUSES or status == "running":
            raise StoreError(f"finish_tuning_session: status {status!r} is not one of done, failed, "
                             "interrupted")
        with self._write(f"finish tuning session {session_id}") as conn:
            cur = conn.execute("UPDATE tuning_sessions SET status = ?, ended_at = ? WHERE id = ?",
                               (status, now(), int(session_id)))
            if cur.rowcount == 0:
                raise StoreError(f"no tuning session {session_id} in {self.path}")

    def record_trial(self, session_id: int, trial: int, *, config_index: int, knobs: Mapping[str, Any],
                     costs: Sequence[Any], error_no: int, all_cost_s: float, timestamp: float,
                     flop: float | None = None) -> int:
        """Store one measured candidate of a session; return the trial's id.

        ``costs`` are the candidate's costs in seconds (``error_no`` 0), or its error message as the
        only element (autotvm's record layout). A successful trial faster than the stored best of
        the session's tuning key on its device becomes the best, in the same transaction.
        ``flop`` (the case's arithmetic operations) gives the trial's GFLOP/s. A best measured on
        another clock than the session's (its session's ``clock``) is replaced by the session's first
        successful trial: costs of two clocks are not compared.
        """
        ok = int(error_no) == 0
        cost = float(sum(float(c) for c in costs) / len(costs)) if ok and costs else None
        if ok and (cost is None or not cost > 0):
            raise StoreError(f"tuning session {session_id}, trial {trial}: a successful trial needs positive "
                             f"costs, got {list(costs)!r}")
        error = "" if ok else "; ".join(str(c) for c in costs)
        gflops = flop / cost / 1e9 if cost and flop else None
        knobs_json = json.dumps(dict(knobs), sort_keys=True)
        with self._write(f"record trial {trial} of tuning session {session_id}") as conn:
            sess = _session(conn, session_id)
            if sess is None:
                raise StoreError(f"no tuning session {session_id} in {self.path}")
            key, device, gpu_model, clock = (sess[k] for k in ("tuning_key", "device", "gpu_model", "clock"))
            trial_id = conn.insert(
                "INSERT INTO tuning_trials (session_id, trial, config_index, knobs, cost_s, costs, error_no,"
                " error, gflops, all_cost_s, timestamp, device, gpu_model)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (int(session_id), int(trial), int(config_index), knobs_json, cost,
                 json.dumps([float(c) for c in costs] if ok else [str(c) for c in costs]), int(error_no),
                 error, gflops, float(all_cost_s), float(timestamp), device, gpu_model))
            if cost is not None:
                best = conn.execute("SELECT cost_s, session_id FROM best_configs WHERE tuning_key = ?"
                                    " AND device = ?", (key, device)).fetchone()
                if best is not None:
                    best = (best[0], (_session(conn, best[1]) or {}).get("clock"))
                if best is None:
                    conn.execute(
                        "INSERT INTO best_configs (tuning_key, device, knobs, config_index, cost_s, gflops,"
                        " session_id, trial_id, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (key, device, knobs_json, int(config_index), cost, gflops, int(session_id),
                         trial_id, now()))
                elif cost < best[0] or best[1] != clock:  # another clock's best: not comparable
                    conn.execute(
                        "UPDATE best_configs SET knobs = ?, config_index = ?, cost_s = ?, gflops = ?,"
                        " session_id = ?, trial_id = ?, updated_at = ? WHERE tuning_key = ? AND device = ?",
                        (knobs_json, int(config_index), cost, gflops, int(session_id), trial_id, now(),
                         key, device))
            return trial_id

    # -- reading ------------------------------------------------------------------------------

    def _dicts(self, sql: str, args: tuple = ()) -> list[dict[str, Any]]:
        cur = self._reader().execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def best_config(self, tuning_key: str, device: str) -> dict[str, Any] | None:
        """The best stored configuration of ``tuning_key`` on ``device`` (keys of ``best_configs``,
        ``knobs`` a dict), or None when it was never tuned there successfully."""
        rows = self._dicts("SELECT * FROM best_configs WHERE tuning_key = ? AND device = ?",
                           (str(tuning_key), str(device)))
        if not rows:
            return None
        row = rows[0]
        row["knobs"] = json.loads(row["knobs"])
        return row

    def best_in_space(self, tuning_key: str, device: str,
                      space: Sequence[tuple[str, Sequence[Any]]]) -> dict[str, Any] | None:
        """The fastest successful trial of ``tuning_key`` on ``device`` whose knobs lie in ``space``
        (for a suite whose knob lists changed since it was tuned), as :meth:`best_config` answers;
        None when no stored trial fits."""
        best = self.best_config(tuning_key, device)
        if best is not None and in_space(best["knobs"], space):
            return best
        for t in self.tuning_trials(tuning_key, device=device, ok_only=True, order="cost_s"):
            if in_space(t["knobs"], space):
                return {"tuning_key": tuning_key, "device": device, "knobs": t["knobs"],
                        "config_index": t["config_index"], "cost_s": t["cost_s"], "gflops": t["gflops"],
                        "session_id": t["session_id"], "trial_id": t["id"], "updated_at": None}
        return None

    def tuning_sessions(self, tuning_key: str | None = None,
                        device: str | None = None) -> list[dict[str, Any]]:
        """Sessions (oldest first), optionally of one tuning key and device; ``space``, ``params`` and
        ``argv`` decoded."""
        where, args = _where(tuning_key=tuning_key, device=device)
        rows = self._dicts(f"SELECT * FROM tuning_sessions {where} ORDER BY id", args)
        for r in rows:
            for k in ("space", "params", "argv"):
                r[k] = json.loads(r[k])
        return rows

    def tuning_trials(self, tuning_key: str | None = None, *, device: str | None = None,
                      session_id: int | None = None, ok_only: bool = False,
                      order: str = "id") -> list[dict[str, Any]]:
        """Trials (``knobs`` and ``costs`` decoded) with their session's ``tuning_key``, ``tuner`` and
        ``clock``,
        in ``order`` ("id": as stored; "cost_s": fastest first)."""
        if order not in ("id", "cost_s"):
            raise StoreError(f"tuning_trials: order {order!r} is not 'id' or 'cost_s'")
        where, args = _where(**{"s.tuning_key": tuning_key, "t.device": device, "t.session_id": session_id})
        if ok_only:
            where += (" AND " if where else "WHERE ") + "t.error_no = 0"
        rows = self._dicts(
            "SELECT t.*, s.tuning_key, s.tuner, s.clock FROM tuning_trials t JOIN tuning_sessions s"
            f" ON s.id = t.session_id {where} ORDER BY t.{order}, t.id", args)
        for r in rows:
            r["knobs"] = json.loads(r["knobs"])
            r["costs"] = json.loads(r["costs"])
        return rows

    def trials_frame(self, tuning_keys: Sequence[str] | None = None) -> pd.DataFrame:
        """One row per trial of ``tuning_keys`` (all with None): the session's tuning key, device,
        tuner, clock (None: not recorded) and start, and the trial's index, cost, GFLOP/s, error
        number and best-so-far cost and GFLOP/s within its session (what the report's curves draw)."""
        rows: list[dict[str, Any]] = []
        for key in (tuning_keys if tuning_keys is not None else [None]):
            where, args = _where(**{"s.tuning_key": key})
            rows += self._dicts(
                "SELECT s.id AS session_id, s.tuning_key, s.device, s.tuner, s.clock, s.started_at,"
                " t.trial, t.cost_s, t.gflops, t.error_no FROM tuning_trials t JOIN tuning_sessions s"
                f" ON s.id = t.session_id {where} ORDER BY s.id, t.trial", args)
        df = pd.DataFrame(rows, columns=["session_id", "tuning_key", "device", "tuner", "clock", "started_at",
                                         "trial", "cost_s", "gflops", "error_no"])
        if df.empty:
            return df.assign(best_cost_s=pd.Series(dtype=float), best_gflops=pd.Series(dtype=float))
        # a failed trial keeps the best before it (none yet: NaN)
        by = df.groupby("session_id", sort=False)
        df["best_cost_s"] = by["cost_s"].cummin()
        df["best_cost_s"] = df.groupby("session_id", sort=False)["best_cost_s"].ffill()
        df["best_gflops"] = by["gflops"].cummax()
        df["best_gflops"] = df.groupby("session_id", sort=False)["best_gflops"].ffill()
        return df


def _session(conn: Connection, session_id: int) -> dict[str, Any] | None:
    """The row of tuning session ``session_id`` by column name (None: no such session); ``clock``
    None where the store's sessions do not have it (written before version 10, as tests do)."""
    cur = conn.execute("SELECT * FROM tuning_sessions WHERE id = ?", (int(session_id),))
    row = cur.fetchone()
    if row is None:
        return None
    return {"clock": None, **dict(zip([d[0] for d in cur.description], row))}


def in_space(knobs: Mapping[str, Any], space: Sequence[tuple[str, Sequence[Any]]]) -> bool:
    """Whether ``knobs`` name exactly the knobs of ``space``, each with one of its values."""
    lists = dict(space)
    return set(knobs) == set(lists) and all(knobs[k] in lists[k] for k in lists)


def _where(**filters: Any) -> tuple[str, tuple]:
    """``WHERE a = ? AND b = ?`` of the filters that are not None, and their values."""
    cols = [(k, v) for k, v in filters.items() if v is not None]
    if not cols:
        return "", ()
    return "WHERE " + " AND ".join(f"{k} = ?" for k, _ in cols), tuple(v for _, v in cols)
