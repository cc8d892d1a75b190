"""Running work isolated in a warm child process: a crash, a hang or a poisoned device context costs
one item, never the process that asked.

:class:`IsolatedWorker` keeps one child Python process and runs picklable callables in it, one at a
time, each with its own timeout; :meth:`IsolatedWorker.call` returns an :class:`Outcome` saying what
became of the item:

* ``ok`` -- it returned; ``value`` is what it returned;
* ``raised`` -- it raised; ``error`` is ``"<type>: <message>"``, ``error_type`` the exception's
  qualified name and ``traceback`` the child's traceback;
* ``crashed`` -- the child died running it (a segfault, an abort, ``os._exit``); ``signal`` names the
  signal that killed it (None: it exited with ``exitcode``);
* ``timeout`` -- it ran longer than its timeout; the child's whole process group was killed;
* ``fatal`` -- it left the device unusable (a CUDA "illegal memory access", "unspecified launch
  failure", "misaligned address" and every other error that sticks to a CUDA context). The child
  decides this by asking the runtime after the item (a context synchronisation that fails twice:
  the error is sticky), reports it and exits; ``error`` is the runtime's message (and the item's
  own error, if it raised one).

The child stays alive across items, so its imports, its CUDA context and the modules it loaded are
paid once. After ``crashed``, ``timeout`` and ``fatal`` the parent replaces it: a fresh child starts at
once (warming up while the parent does other work) and runs the next item.

The child is a fresh interpreter (fork and exec of ``sys.executable``, as multiprocessing's "spawn"
start method makes one; never a bare fork, which CUDA contexts and Ray's threads do not survive). It
gets this process's ``sys.path`` (plus the folders that modules of ``imports`` already imported here
came from) and working folder, its environment updated by ``env`` (a value of
None removes a variable: e.g. ``{"CUDA_VISIBLE_DEVICES": "1"}``), imports the modules of ``imports``
and calls ``initializer(*initargs)`` before it says it is ready; the timeout of an item starts when the
item is sent. Callables and their arguments travel pickled, so a callable must be importable by its
module and name in the child (a function defined at the top of a module, not in ``__main__`` of a
script run as a file nor inside another function).

No child outlives its parent. The child is the leader of its own process group (so a timeout kills
whatever it started too, e.g. a compiler), and a thread in it watches the parent: when the parent is
gone (SIGKILL, SIGTERM without a handler) the child kills its group. The parent closes its children at
exit (``atexit``), in :meth:`IsolatedWorker.close`, and when it is interrupted while waiting for an
item (KeyboardInterrupt, or any exception a signal handler raises): the child is killed and the
exception goes on.

Example
-------
>>> from kernels.contrib.isolate import IsolatedWorker
>>> with IsolatedWorker(imports=("numpy",)) as w:          # doctest: +SKIP
...     out = w.call(pow, 2, 10, timeout=5.0)
...     out.status, out.value
('ok', 1024)
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping, Optional, Sequence

from kernels.errors import TVMError
from kernels.runtime.cache import FORK_LOCK

__all__ = ["IsolateStartError", "IsolatedWorker", "Outcome", "STATUSES", "cuda_context_error"]

#: what :attr:`Outcome.status` can be
STATUSES = ("ok", "raised", "crashed", "timeout", "fatal")

#: how often the child looks whether its parent is still there (seconds)
_WATCH_PARENT_S = 0.2

# The child's first lines: only the standard library until sys.path is the parent's, then this module.
_BOOT = ("import sys\n"
         "from multiprocessing.connection import Connection\n"
         "conn = Connection(int(sys.argv[1]))\n"
         "boot = conn.recv()\n"
         "sys.path[:] = boot['sys_path']\n"
         "import importlib\n"
         "importlib.import_module(boot['module'])._child_main(conn, boot)\n")


class IsolateStartError(TVMError):
    """The child process could not be made ready: an import of ``imports`` or the initializer failed,
    or the child died while starting. No item is at fault; the message carries the child's error."""


@dataclass(frozen=True)
class Outcome:
    """What became of one item run by :meth:`IsolatedWorker.call` (see the module docstring).

    Attributes
    ----------
    status : str
        One of :data:`STATUSES`: ``ok``, ``raised``, ``crashed``, ``timeout``, ``fatal``.
    value : object
        What the callable returned (``ok`` only).
    error : str
        For every other status, one line saying what happened.
    error_type : str
        ``raised``: the exception's qualified name (``"builtins.ValueError"``).
    traceback : str
        ``raised`` and ``fatal``: the child's traceback of the item's exception, if any.
    signal : int or None
        ``crashed``: the signal that killed the child (None: it exited on its own).
    exitcode : int or None
        ``crashed``: the child's exit status when it exited on its own.
    seconds : float
        Wall time from sending the item to its outcome.
    pid : int
        The child that ran it.
    """

    status: str
    value: Any = None
    error: str = ""
    error_type: str = ""
    traceback: str = ""
    signal: Optional[int] = None
    exitcode: Optional[int] = None
    seconds: float = 0.0
    pid: int = 0

    @property
    def ok(self) -> bool:
        """Whether the item returned normally."""
        return self.status == "ok"

    @property
    def child_replaced(self) -> bool:
        """Whether the child that ran the item is gone (crashed, timed out, or its device was lost)."""
        return self.status in ("crashed", "timeout", "fatal")


_LIVE: "weakref.WeakSet[IsolatedWorker]" = weakref.WeakSet()


def _close_all() -> None:
    for w in list(_LIVE):
        try:
            w.close(grace_s=0.5)
        except Exception:  # at exit: never raise
            pass


atexit.register(_close_all)


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class IsolatedWorker:
    """A warm child process that runs picklable callables one at a time, each with a timeout.

    Parameters
    ----------
    env : mapping of str to str or None, optional
        Changes to this process's environment for the child (None removes a variable).
    imports : sequence of str
        Modules the child imports before it is ready (e.g. ones registering workloads).
    initializer : callable, optional
        Called as ``initializer(*initargs)`` in the child after ``imports``, before it is ready.
    initargs : tuple
        Its arguments (pickled).
    start_timeout : float
        Seconds a child may take to become ready; longer is an :class:`IsolateStartError`.
    name : str
        A name for messages and logs.

    Notes
    -----
    One item runs at a time; calls from several threads wait for each other. The child starts with
    the first :meth:`call` (or :meth:`start`).
    """

    def __init__(self, *, env: Optional[Mapping[str, Optional[str]]] = None, imports: Sequence[str] = (),
                 initializer: Optional[Callable[..., Any]] = None, initargs: tuple = (),
                 start_timeout: float = 120.0, name: str = "isolated worker"):
        if initializer is not None and not callable(initializer):
            raise TypeError(f"IsolatedWorker: initializer must be callable, got {initializer!r}")
        if isinstance(imports, str):
            raise TypeError(f"IsolatedWorker: imports must be a sequence of module names, got the string "
                            f"{imports!r}")
        if start_timeout <= 0:
            raise ValueError(f"IsolatedWorker: start_timeout must be positive, got {start_timeout}")
        self.env = dict(env or {})
        self.imports = tuple(imports)
        self.name = name
        self.start_timeout = float(start_timeout)
        try:
            self._setup = pickle.dumps((self.imports, initializer, tuple(initargs)))
        except Exception as exc:
            raise TypeError(f"IsolatedWorker: the initializer and its arguments cannot be pickled for the "
                            f"child: {type(exc).__name__}: {exc}") from None
        self._proc: Optional[subprocess.Popen] = None
        self._conn: Optional[Connection] = None
        self._ready = False
        self._lock = threading.RLock()
        self._closed = False
        #: how many children were started so far (1 after the first start; +1 per replacement)
        self.generation = 0
        #: how many children were replaced after a crash, a timeout or a fatal device error
        self.replacements = 0
        _LIVE.add(self)

    # -- the child's lifecycle ------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        """The process id of the current child (None when none is running)."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start a child if none is running (returns at once; the child warms up on its own)."""
        with self._lock:
            if self._closed:
                raise TVMError(f"{self.name}: the worker was closed")
            if self._proc is None:
                self._spawn()

    def _spawn(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        env = dict(os.environ)
        for key, value in self.env.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = str(value)
        # under FORK_LOCK until this process holds no copy of the child's socket: a worker forked
        # meanwhile would keep it open (kernels.runtime.cache)
        with FORK_LOCK:
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, str(child_sock.fileno())], env=env,
                    pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True)
            finally:
                child_sock.close()
        self._conn = Connection(parent_sock.detach())
        self._ready = False
        self.generation += 1
        path = list(sys.path)
        path += [p for p in _import_roots(self.imports) if p not in path]
        self._conn.send({"sys_path": path, "module": __name__, "parent_pid": os.getpid(),
                         "setup": self._setup, "name": self.name})

    def _wait_ready(self) -> None:
        """Wait for the child's hello (it has imported and initialised); IsolateStartError if it fails."""
        if self._ready:
            return
        assert self._proc is not None and self._conn is not None
        deadline = time.monotonic() + self.start_timeout
        msg: Any = None
        try:
            if self._conn.poll(max(0.0, deadline - time.monotonic())):
                msg = self._conn.recv()
        except (EOFError, OSError):
            msg = None
        if isinstance(msg, tuple) and msg and msg[0] == "ready":
            self._ready = True
            return
        how = self._kill()
        self._proc = self._conn = None
        if isinstance(msg, tuple) and msg and msg[0] == "start_failed":
            raise IsolateStartError(f"{self.name}: the child process could not start: {msg[1]}\n{msg[2]}")
        if how is None:
            raise IsolateStartError(f"{self.name}: the child process was not ready after "
                                    f"{self.start_timeout:g} s (killed)")
        raise IsolateStartError(f"{self.name}: the child process died while starting ({how})")

    def _kill(self) -> Optional[str]:
        """Kill the child's process group and reap it; how it had ended (None: it was still running)."""
        proc, conn = self._proc, self._conn
        if proc is None:
            return None
        how = _ended(proc)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and whatever it started (its own group)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
            code = None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        if how is None or code is None:
            return how
        return _describe_exit(code)

    def _replace(self) -> None:
        self._kill()
        self._proc = self._conn = None
        self.replacements += 1
        if not self._closed:
            self._spawn()  # warms up while the caller does other work

    def close(self, grace_s: float = 2.0) -> None:
        """Stop the child (asked to exit, then its process group killed after ``grace_s`` seconds) and
        refuse further calls. Calling it again does nothing."""
        with self._lock:
            self._closed = True
            proc, conn = self._proc, self._conn
            if proc is None:
                return
            try:
                if conn is not None:
                    conn.send(("stop",))
            except (OSError, ValueError):
                pass
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and _ended(proc) is None:
                time.sleep(0.01)
            self._kill()
            self._proc = self._conn = None
            _LIVE.discard(self)

    def kill(self) -> None:
        """Kill the current child's process group now, from any thread (the lock is not taken: a
        :meth:`call` waiting on the child in another thread returns ``crashed``, and the next call
        starts a fresh child). Does nothing without a child."""
        proc = self._proc
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> IsolatedWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- items ----------------------------------------------------------------------------------

    def call(self, fn: Callable[..., Any], *args: Any, timeout: Optional[float] = None,
             **kwargs: Any) -> Outcome:
        """Run ``fn(*args, **kwargs)`` in the child and say what became of it.

        Parameters
        ----------
        fn : callable
            Importable by module and name in the child (pickled by reference).
        *args, **kwargs
            Its arguments (pickled).
        timeout : float, optional
            Seconds the item may run (None: no limit); longer kills the child's process group and is
            ``timeout``.

        Returns
        -------
        Outcome

        Raises
        ------
        TypeError
            ``fn`` or its arguments cannot be pickled (nothing was sent).
        IsolateStartError
            A child could not be started (see :class:`IsolateStartError`).
        """
        if timeout is not None and timeout <= 0:
            raise ValueError(f"{self.name}: timeout must be positive, got {timeout}")
        try:
            payload = pickle.dumps(("call", fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise TypeError(f"{self.name}: {getattr(fn, '__qualname__', fn)!r} or its arguments cannot be "
                            f"sent to the child process: {type(exc).__name__}: {exc}") from None
        with self._lock:
            self.start()
            if self._proc is not None and _ended(self._proc) is not None:
                self._kill()  # it died between items (killed from outside): no item is at fault
                self._proc = self._conn = None
                self.start()
            self._wait_ready()
            assert self._proc is not None and self._conn is not None
            pid = self._proc.pid
            t0 = time.monotonic()
            try:
                self._conn.send_bytes(payload)
                got = self._conn.poll(timeout)
                msg = self._conn.recv() if got else None
            except (EOFError, OSError, ConnectionError):
                got, msg = True, None  # the child is gone: see how below
            except BaseException:
                # interrupted while waiting (KeyboardInterrupt, a signal handler's exception): the
                # child must not outlive this; the next call starts a fresh one
                self._kill()
                self._proc = self._conn = None
                raise
            seconds = time.monotonic() - t0
            if not got:
                self._replace()
                return Outcome("timeout", error=f"no result after {seconds:.1f} s (timeout {timeout:g} s); "
                               f"the child process {pid} and its process group were killed",
                               seconds=seconds, pid=pid)
            if msg is None:
                return self._crashed(pid, seconds)
            return self._outcome(msg, pid, seconds)

    def _crashed(self, pid: int, seconds: float) -> Outcome:
        proc = self._proc
        assert proc is not None
        try:
            code: Optional[int] = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # the socket closed but the process lingers: kill it
            code = None
        self._replace()
        if code is not None and code < 0:
            return Outcome("crashed", error=f"the child process {pid} was killed by {_signal_name(-code)}",
                           signal=-code, seconds=seconds, pid=pid)
        return Outcome("crashed", error=f"the child process {pid} exited with status {code} while running "
                       "the item", exitcode=code, seconds=seconds, pid=pid)

    def _outcome(self, msg: tuple, pid: int, seconds: float) -> Outcome:
        kind = msg[0]
        if kind == "ok":
            try:
                value = pickle.loads(msg[1])
            except Exception as exc:
                return Outcome("raised", error=f"the item's value cannot be unpickled here: "
                               f"{type(exc).__name__}: {exc}", error_type=type(exc).__qualname__,
                               seconds=seconds, pid=pid)
            return Outcome("ok", value=value, seconds=seconds, pid=pid)
        if kind == "raised":
            _, error_type, error, tb = msg
            return Outcome("raised", error=error, error_type=error_type, traceback=tb, seconds=seconds,
                           pid=pid)
        if kind == "fatal":
            _, error, tb = msg
            self._replace()
            return Outcome("fatal", error=error, traceback=tb, seconds=seconds, pid=pid)
        raise TVMError(f"{self.name}: the child sent an unknown message {kind!r}")  # pragma: no cover


def _import_roots(names: Sequence[str]) -> list:
    """The folders that modules of ``names`` already imported here were imported from (a suite's
    modules are imported with the suite's folder on ``sys.path`` only while they load): the child
    finds them there too."""
    roots = []
    for name in names:
        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None)
        if not file:
            continue
        up = name.count(".") + (1 if os.path.basename(file) == "__init__.py" else 0)
        root = os.path.dirname(os.path.abspath(file))
        for _ in range(up):
            root = os.path.dirname(root)
        roots.append(root)
    return roots


def _ended(proc: subprocess.Popen) -> Optional[str]:
    """How the child ended, without reaping it (None: still running)."""
    if proc.returncode is not None:
        return _describe_exit(proc.returncode)
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return "reaped"
    if info is None:
        if not _zombie(proc.pid):
            return None
        # /proc can show the child dead a moment before waitid reports it: wait for the report
        deadline = time.monotonic() + 0.5
        while info is None and time.monotonic() < deadline:
            time.sleep(0.005)
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is None:
            return "ended (a zombie process)"
    if info.si_code == os.CLD_EXITED:
        return _describe_exit(info.si_status)
    return _describe_exit(-info.si_status)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited and waits to be reaped (Linux /proc; False where unknown)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _describe_exit(code: int) -> str:
    return f"killed by {_signal_name(-code)}" if code < 0 else f"exit status {code}"


# -- the child's side -----------------------------------------------------------------------------


def cuda_context_error() -> Optional[str]:
    """In a process that used CUDA through the runtime: the error that makes a CUDA context of this
    thread unusable, or None. A context is unusable when synchronising it fails twice in a row (a
    sticky error: an illegal memory access, a misaligned address, an unspecified launch failure, a
    trap...); an error that the first synchronisation reports and clears is not fatal. A process that
    never initialised CUDA is not asked (and pycuda is not imported)."""
    device = sys.modules.get("kernels.runtime.device")
    if device is None:
        return None
    drv = (device._cuda_state.get("result") or (None, None))[0]
    contexts = getattr(device._cuda_local, "contexts", None) or {}
    if drv is None or not contexts:
        return None
    for index, ctx in list(contexts.items()):
        first = None
        for _ in range(2):
            try:
                with ctx:
                    drv.Context.synchronize()
                break
            except Exception as exc:  # pycuda's drv.Error and its subclasses
                if first is not None:
                    return f"the CUDA context of cuda({index}) is unusable: {type(exc).__name__}: {exc}"
                first = exc
    return None


def _watch_parent(parent_pid: int) -> None:
    """Kill this child's process group when the parent is gone (its parent id changes)."""
    while True:
        time.sleep(_WATCH_PARENT_S)
        if os.getppid() != parent_pid:
            try:
                os.killpg(os.getpgrp(), signal.SIGKILL)
            finally:
                os._exit(1)


def _send(conn: Connection, msg: tuple) -> None:
    try:
        conn.send(msg)
    except Exception as exc:  # a message that cannot be pickled: say so instead
        conn.send(("raised", type(exc).__qualname__, f"the item's result cannot be sent back: "
                   f"{type(exc).__name__}: {exc}", ""))


def _child_main(conn: Connection, boot: dict) -> None:
    """The child's loop: set up, say ready, then run items until told to stop or the parent is gone."""
    threading.Thread(target=_watch_parent, args=(boot["parent_pid"],), name="watch-parent",
                     daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this process ends
    try:
        imports, initializer, initargs = pickle.loads(boot["setup"])
        import importlib

        for mod in imports:
            importlib.import_module(mod)
        if initializer is not None:
            initializer(*initargs)
    except BaseException as exc:
        conn.send(("start_failed", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=8)))
        os._exit(1)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            break  # the parent closed its end
        error = tb = ""
        value: Any = None
        ok = False
        try:
            msg = pickle.loads(data)
            if msg[0] == "stop":
                break
            _, fn, args, kwargs = msg
            value = fn(*args, **kwargs)
            ok = True
        except BaseException as exc:  # the item's failure is its outcome (SystemExit included)
            error_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
            error = f"{type(exc).__name__}: {exc}"
            tb = traceback.format_exc(limit=12)
        fatal = cuda_context_error()
        if fatal is not None:
            text = fatal if ok else f"{fatal} (the item raised {error})"
            _send(conn, ("fatal", text, tb))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(3)  # a poisoned context cannot even be torn down cleanly
        if ok:
            try:
                _send(conn, ("ok", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))
            except Exception as exc:
                _send(conn, ("raised", type(exc).__qualname__, f"the item's value cannot be pickled: "
                             f"{type(exc).__name__}: {exc}", ""))
        else:
            _send(conn, ("raised", error_type, error, tb))
        sys.stdout.flush()
        sys.stderr.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown (a CUDA context may be left current by a library)
