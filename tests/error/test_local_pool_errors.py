"""Bad input to the work pool without Ray (kernels.contrib.localpool.LocalPool) is refused naming the
thing at fault, and never loses an item: each submitted item still gets exactly one outcome."""

from __future__ import annotations

import pytest

from kernels.contrib.localpool import LocalPool
from kernels.contrib.workpool import Item


def square(x):  # importable by the child: this module's folder is on the sys.path it inherits
    return x * x


@pytest.mark.parametrize("bad", [0, -1.0])
def test_a_startup_timeout_that_is_not_positive_is_named(bad):
    with pytest.raises(ValueError, match=f"startup_timeout must be positive, got {bad}"):
        LocalPool(startup_timeout=bad)


def test_a_payload_that_cannot_be_sent_to_the_child_is_an_outcome_naming_it():
    unsendable = lambda x: x  # noqa: E731 - a lambda cannot be pickled by reference
    with LocalPool() as pool:
        got = {}
        pool.run([Item("bad", (unsendable, (1,)), timeout_s=30), Item("good", (square, (5,)), timeout_s=30)],
                 lambda o: got.setdefault(o.key, o))
    assert sorted(got) == ["bad", "good"]
    assert got["bad"].status == "crashed" and got["bad"].cause == "unsendable"
    assert "cannot be sent to the child process" in got["bad"].message and "lambda" in got["bad"].message
    assert got["good"].status == "ok" and got["good"].value == 25
