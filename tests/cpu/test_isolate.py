"""kernels.contrib.isolate: a warm child process runs items one at a time; each item's outcome is
typed (ok / raised / crashed / timeout); a child that died or hung is replaced and the next item
runs in a fresh one; no child outlives its parent, however the parent ends. Real processes, real
signals. (The ``fatal`` outcome needs a CUDA device: tests/gpu/test_isolate_gpu.py.)"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernels.contrib.isolate import IsolatedWorker, IsolateStartError, Outcome, cuda_context_error

ROOT = Path(__file__).resolve().parents[2]


# -- items (importable by the child: this module is on the sys.path it inherits) -----------------

def add(a, b):
    return a + b


def whoami():
    return os.getpid(), os.getpgrp(), os.environ.get("ISOLATE_PROBE"), "wave" in sys.modules


def raise_value_error(text):
    raise ValueError(text)


def segfault():
    ctypes.string_at(0)


def abort():
    os.abort()


def exit_now(code):
    os._exit(code)


def spawn_sleeper_and_hang(path):
    """Start a grandchild (in the child's process group), note its pid, then hang."""
    proc = subprocess.Popen(["sleep", "300"])
    Path(path).write_text(str(proc.pid))
    while True:
        time.sleep(0.05)


def unpicklable_value():
    return lambda: 0


def set_marker(value):
    os.environ["ISOLATE_INIT"] = value


def marker():
    return os.environ.get("ISOLATE_INIT")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def worker():
    with IsolatedWorker(env={"ISOLATE_PROBE": "yes"}, imports=("wave",), initializer=set_marker,
                        initargs=("ready",)) as w:
        yield w


# -- outcomes -------------------------------------------------------------------------------------

def test_items_run_in_one_warm_child_with_its_environment_imports_and_initializer(worker):
    first = worker.call(whoami, timeout=30)
    assert first.status == "ok", first
    pid, pgid, probe, imported = first.value
    assert pid != os.getpid() and pid == first.pid == worker.pid
    assert pgid == pid  # the leader of its own process group
    assert probe == "yes" and imported
    assert worker.call(marker).value == "ready"
    assert worker.call(add, 2, b=40).value == 42
    assert worker.call(whoami).value[0] == pid  # the same child: kept warm


def test_an_exception_is_the_items_outcome_and_the_child_lives_on(worker):
    pid = worker.call(whoami).value[0]
    out = worker.call(raise_value_error, "no such knob 'x'")
    assert out.status == "raised" and not out.ok and not out.child_replaced
    assert out.error == "ValueError: no such knob 'x'"
    assert out.error_type == "builtins.ValueError"
    assert "raise_value_error" in out.traceback
    assert worker.call(whoami).value[0] == pid


@pytest.mark.parametrize("fn, args, sig, code", [(segfault, (), signal.SIGSEGV, None),
                                                 (abort, (), signal.SIGABRT, None),
                                                 (exit_now, (7,), None, 7)])
def test_a_dying_child_is_reported_and_replaced(worker, fn, args, sig, code):
    before = worker.call(whoami).value[0]
    generation = worker.generation
    out = worker.call(fn, *args, timeout=30)
    assert out.status == "crashed" and out.child_replaced, out
    assert out.pid == before and not alive(before)
    assert out.signal == (int(sig) if sig else None) and out.exitcode == code
    assert (sig.name if sig else f"status {code}") in out.error
    after = worker.call(whoami)
    assert after.ok and after.value[0] != before and worker.generation == generation + 1
    assert after.value[2] == "yes" and worker.call(marker).value == "ready"  # set up like the first


def test_a_hanging_item_is_killed_with_its_process_group_at_its_timeout(worker, tmp_path):
    note = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    out = worker.call(spawn_sleeper_and_hang, str(note), timeout=1.5)
    took = time.monotonic() - t0
    assert out.status == "timeout", out
    assert 1.5 <= out.seconds and took < 1.5 + 10
    assert "timeout 1.5 s" in out.error
    assert not alive(out.pid)
    assert wait_gone(int(note.read_text()))  # what the item started died with it
    assert worker.call(add, 1, 1).value == 2  # a fresh child


def test_a_value_that_cannot_be_pickled_is_an_error_not_a_crash(worker):
    pid = worker.call(whoami).value[0]
    out = worker.call(unpicklable_value)
    assert out.status == "raised" and "cannot be pickled" in out.error
    assert worker.call(whoami).value[0] == pid


def test_a_callable_that_cannot_be_sent_is_refused_before_sending(worker):
    with pytest.raises(TypeError, match="cannot be sent to the child process"):
        worker.call(lambda: 0)
    with pytest.raises(ValueError, match="timeout must be positive"):
        worker.call(add, 1, 2, timeout=0)


def test_a_child_that_cannot_start_names_the_import():
    w = IsolatedWorker(imports=("kbench_no_such_module",))
    with pytest.raises(IsolateStartError, match="kbench_no_such_module"):
        w.call(add, 1, 2)
    w.close()
    with pytest.raises(Exception, match="closed"):
        w.call(add, 1, 2)


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match="imports must be a sequence"):
        IsolatedWorker(imports="numpy")
    with pytest.raises(TypeError, match="initializer must be callable"):
        IsolatedWorker(initializer=3)
    with pytest.raises(ValueError, match="start_timeout"):
        IsolatedWorker(start_timeout=0)


def test_close_ends_the_child():
    w = IsolatedWorker()
    pid = w.call(whoami).value[0]
    w.close()
    assert wait_gone(pid) and w.pid is None
    w.close()  # twice: nothing


def test_no_cuda_context_is_asked_about_where_cuda_was_never_used():
    assert cuda_context_error() is None
    assert Outcome("ok").ok and Outcome("fatal").child_replaced


# -- the parent ends -------------------------------------------------------------------------------

_PARENT = textwrap.dedent("""
    import signal, sys, time
    # Python turns SIGINT into KeyboardInterrupt only where it was not ignored at start-up: a test
    # process that inherited SIG_IGN (an earlier test of the same pytest worker left it so) would
    # ignore the test's SIGINT and hang
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {here!r})
    from kernels.contrib.isolate import IsolatedWorker
    import test_isolate as t
    w = IsolatedWorker()
    print(w.call(t.whoami).value[0], flush=True)
    if {hang!r}:
        w.call(t.spawn_sleeper_and_hang, {note!r})
    else:
        time.sleep(300)
""")


@pytest.mark.parametrize("how, hang", [("SIGKILL", False), ("SIGTERM", False), ("SIGINT", True),
                                       ("SIGKILL", True)])
def test_no_child_outlives_its_parent(tmp_path, how, hang):
    note = tmp_path / "grandchild.pid"
    code = _PARENT.format(here=str(Path(__file__).parent), hang=hang, note=str(note))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env)
    try:
        child = int(parent.stdout.readline())
        if hang:
            deadline = time.monotonic() + 30
            while not note.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        assert alive(child)
        parent.send_signal(getattr(signal, how))
        parent.wait(timeout=30)
        assert wait_gone(child), f"the child {child} outlived its parent ({how})"
        if hang:
            assert wait_gone(int(note.read_text()))
        if how == "SIGINT":
            assert "KeyboardInterrupt" in parent.stderr.read()
    finally:
        parent.kill()
        parent.wait()


def test_a_child_killed_between_items_is_not_charged_to_the_next_item():
    with IsolatedWorker() as w:
        pid = w.call(whoami).value[0]
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid)
        out = w.call(add, 2, 3)
        assert out.ok and out.value == 5 and out.pid != pid, out
