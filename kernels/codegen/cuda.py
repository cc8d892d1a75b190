"""CUDA C dialect."""

from __future__ import annotations

from typing import Optional

from ..errors import BuildError
from ..tir.expr import Call, IntImm
from .c_family import CFamilyCodegen

HEADER = """#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
  #define int64_t long long
  #define uint64_t unsigned long long
#endif
"""


class CUDACodegen(CFamilyCodegen):
    target = "cuda"
    restrict = "__restrict__"
    shared_qualifier = "__shared__"
    helper_qualifier = "__device__ __forceinline__"
    int_types = {"int8": "signed char", "int16": "short", "int32": "int", "int64": "int64_t",
                 "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "uint64_t", "bool": "bool"}
    float_types = {"float16": "half", "float32": "float", "float64": "double"}
    hoist_shared = False
    device_kernels = True
    vector_type_names = {"float32": "float", "float64": "double", "float16": "half", "int8": "char",
                         "uint8": "uchar", "int16": "short", "uint16": "ushort", "int32": "int",
                         "uint32": "uint", "int64": "longlong", "uint64": "ulonglong"}
    lane_names = (".x", ".y", ".z", ".w")

    def thread_index(self, tag: str) -> str:
        return f"((int){tag})"

    def barrier(self) -> str:
        return "__syncthreads();"

    def special_float(self, v, t):
        import math

        if t == "float64":
            bits = "0x7ff8000000000000" if math.isnan(v) else ("0x7ff0000000000000" if v > 0 else
                                                               "0xfff0000000000000")
            return f"__longlong_as_double({bits}LL)"
        bits = "0x7fc00000" if math.isnan(v) else ("0x7f800000" if v > 0 else "0xff800000")
        out = f"__int_as_float({bits})"
        return out if t == "float32" else f"(({self.type_str(t)}){out})"

    def minmax(self, e):
        fn = "min" if type(e).__name__ == "Min" else "max"
        return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"

    def dialect_call(self, e: Call) -> str:
        name = e.op.name
        if name in ("tir.cuda.shfl_down", "tir.cuda.shfl"):
            fn = "__shfl_down_sync" if name.endswith("down") else "__shfl_sync"
            return f"{fn}({', '.join(self.expr(a) for a in e.args)})"
        return super().dialect_call(e)

    def header(self) -> str:
        out = HEADER
        if "float16" in self.uses_dtypes:
            out = "#include <cuda_fp16.h>\n" + out
        return out

    def kernel_signature(self, name: str, params, block_threads) -> str:
        lb = f"__launch_bounds__({block_threads}) " if block_threads else ""
        return f'extern "C" __global__ void {lb}{name}({", ".join(params)})'

    def build_arch(self, arch: str) -> str:
        return check_arch(arch)

    def launch_bounds(self, block_extents) -> Optional[int]:
        if not all(x is None or isinstance(x, IntImm) for x in block_extents):
            return None
        n = 1
        for x in block_extents:
            n *= x.value if x is not None else 1
        return n

    def vector_make(self, vtype: str, lanes) -> str:
        return f"make_{vtype}({', '.join(lanes)})"

    def aligned_array(self, qualifier: str, t: str, name: str, size: int, align: int) -> str:
        return f"{qualifier} __align__({align}) {t} {name}[{size}];"


def check_arch(arch: str) -> str:
    a = arch.replace("sm_", "")
    if not a.isdigit() or int(a) < 75:
        raise BuildError(f"CUDA arch {arch!r} is not supported: CUDA 13 builds sm_75 and newer (e.g. sm_90)")
    return f"sm_{a}"
