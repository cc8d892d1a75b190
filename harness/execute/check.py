"""Correctness checks (docs/ARCHITECTURE.md, "Checking"): a case's outputs against the float64 numpy
reference.

Rules
-----
* An element passes when ``|got - ref| <= atol + rtol * |ref|`` (numpy's ``allclose`` rule),
  computed in float64 (integers with both tolerances 0 are compared exactly, without going
  through float64, so large 64-bit values do not round together).
* Non-finite values are never "close": where the reference is finite, a NaN or an infinity in
  the output fails whatever the tolerances; where the reference is NaN the output must be NaN;
  where it is +inf or -inf the output must be the same infinity.
* Shapes must match exactly (no broadcasting), and the numbers of outputs too.

The message of a failure names the output's index, how many elements differ out of how many,
the worst element (its index, the value got and the value expected), the largest absolute and
relative error over the finite elements, and how many outputs were left unwritten (still the
poison value the workload filled them with, see :func:`poisoned_unwritten`).
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["check_outputs", "poisoned_unwritten", "sentinel"]


def sentinel(dtype) -> Optional[object]:
    """The poison value the workloads fill outputs with: NaN for floats, the type's minimum for
    integers (``kernels.workloads.poison``), None for types that cannot be poisoned (bool)."""
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        return np.nan
    if dt.kind in "iu":
        return np.iinfo(dt).min
    return None


def poisoned_unwritten(arr: np.ndarray, value: Optional[object] = None) -> int:
    """Count the entries of ``arr`` that still hold the poison value (NaN, or the integer sentinel).

    Parameters
    ----------
    arr : numpy.ndarray
        An output copied back from the device after the kernel ran.
    value : optional
        The sentinel to look for; by default :func:`sentinel` of the array's dtype.

    Returns
    -------
    int
        How many entries were (apparently) never written. For unsigned integers the sentinel is 0,
        which a kernel may legitimately write, so only use the count as a hint there.
    """
    a = np.asarray(arr)
    if value is None:
        value = sentinel(a.dtype)
    if value is None:
        return 0
    if isinstance(value, float) and np.isnan(value):
        return int(np.count_nonzero(np.isnan(a))) if a.dtype.kind in "fc" else 0
    return int(np.count_nonzero(a == value))


def _fmt(x) -> str:
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.9g}"
    return str(x.item() if hasattr(x, "item") else x)


def _index(flat: int, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _check_one(i: int, got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> Optional[str]:
    """None when output ``i`` passes, else the message."""
    g = np.asarray(got)
    r = np.asarray(ref)
    if g.shape != r.shape:
        return f"output {i}: shape {g.shape} differs from the reference's {r.shape}"
    if g.size == 0:
        return None
    total = g.size
    exact = rtol == 0 and atol == 0 and g.dtype.kind in "iub" and r.dtype.kind in "iub"
    if exact:
        bad = g != r
        nbad = int(np.count_nonzero(bad))
        if nbad == 0:
            return None
        gf, rf = g.astype(np.float64), r.astype(np.float64)
        diff = np.abs(gf - rf)
        flat = int(np.argmax(np.where(bad, diff, -1.0).ravel()))
        rel = diff / np.maximum(np.abs(rf), np.finfo(np.float64).tiny)
        return (
            f"output {i}: {nbad} of {total} elements differ (exact comparison); worst at index "
            f"{_index(flat, g.shape)}: got {_fmt(g.ravel()[flat])}, expected {_fmt(r.ravel()[flat])}; "
            f"max abs error {float(diff[bad].max()):.3g}, max rel error {float(rel[bad].max()):.3g}"
            + _unwritten_note(g)
        )

    if _all_close(g, r, rtol, atol):
        return None
    gf = g.astype(np.float64)
    rf = r.astype(np.float64)
    ref_finite = np.isfinite(rf)
    got_finite = np.isfinite(gf)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(gf - rf)
        close = ref_finite & got_finite & (diff <= atol + rtol * np.abs(rf))
    # non-finite references: NaN must meet NaN, an infinity the same infinity
    ref_nan = np.isnan(rf)
    close |= ref_nan & np.isnan(gf)
    close |= np.isinf(rf) & (gf == rf)
    bad = ~close
    nbad = int(np.count_nonzero(bad))
    if nbad == 0:
        return None

    # how far past its tolerance each element is; non-finite mismatches rank worst
    with np.errstate(invalid="ignore", over="ignore"):
        excess = diff - (atol + rtol * np.abs(rf))
    excess = np.where(bad & ref_finite & got_finite, excess, -np.inf)
    excess = np.where(bad & ~(ref_finite & got_finite), np.inf, excess)
    flat = int(np.argmax(excess.ravel()))
    both = ref_finite & got_finite
    if both.any():
        d = diff[both]
        rel = d / np.maximum(np.abs(rf[both]), np.finfo(np.float64).tiny)
        errs = f"max abs error {float(d.max()):.3g}, max rel error {float(rel.max()):.3g}"
    else:
        errs = "no finite pair to measure the error on"
    nonfinite = int(np.count_nonzero(bad & ~got_finite & ref_finite))
    nf = f"; {nonfinite} non-finite where the reference is finite" if nonfinite else ""
    return (
        f"output {i}: {nbad} of {total} elements differ (rtol={rtol:g}, atol={atol:g}); worst at "
        f"index {_index(flat, g.shape)}: got {_fmt(g.ravel()[flat])}, expected "
        f"{_fmt(r.ravel()[flat])}; {errs} over finite elements{nf}" + _unwritten_note(g)
    )


#: elements compared at a time by the fast pass (float64 temporaries of a few MiB stay in cache)
CHUNK = 1 << 19


def _all_close(g: np.ndarray, r: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether every element passes, by the rules above, in chunks (about 10x faster than whole-
    array passes on 10^8 elements); the detailed message is only worked out when this says no."""
    gflat, rflat = g.reshape(-1), r.reshape(-1)
    for start in range(0, gflat.size, CHUNK):
        gf = gflat[start:start + CHUNK].astype(np.float64)
        rf = rflat[start:start + CHUNK].astype(np.float64, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):
            tol = np.abs(rf)
            tol *= rtol
            tol += atol
            diff = np.subtract(gf, rf)
            np.abs(diff, out=diff)
            # False wherever either side is not finite: a NaN difference, or an infinite
            # reference (whose tolerance is infinite too) — those go to the exact rules below
            ok = diff <= tol
            ok &= np.isfinite(tol)
        if not ok.all():
            bad = ~ok
            gb, rb = gf[bad], rf[bad]
            special = (np.isnan(rb) & np.isnan(gb)) | (np.isinf(rb) & (gb == rb))
            if not special.all():
                return False
    return True


def _unwritten_note(g: np.ndarray) -> str:
    n = poisoned_unwritten(g)
    if n and g.dtype.kind != "u":
        return f"; {n} element(s) still hold the poison value (output not fully written)"
    return ""


def check_outputs(
    got: Sequence[np.ndarray], ref: Sequence[np.ndarray], rtol: float, atol: float
) -> Tuple[bool, str]:
    """Compare a case's outputs with the reference outputs.

    Parameters
    ----------
    got : list of numpy.ndarray
        The outputs copied back from the device, in the workload's output order.
    ref : list of numpy.ndarray
        The reference outputs (float64 for float workloads).
    rtol, atol : float
        Relative and absolute tolerances (``|got - ref| <= atol + rtol * |ref|``).

    Returns
    -------
    (bool, str)
        ``(True, "")`` when every output passes; otherwise ``False`` and one line per failing
        output (see the module's docstring for what a line says).
    """
    if len(got) != len(ref):
        return False, f"{len(got)} output(s) produced, the reference has {len(ref)}"
    messages: List[str] = []
    for i, (g, r) in enumerate(zip(got, ref)):
        msg = _check_one(i, g, r, float(rtol), float(atol))
        if msg is not None:
            messages.append(msg)
    return (not messages), "\n".join(messages)
