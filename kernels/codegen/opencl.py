"""OpenCL C dialect."""

from __future__ import annotations

from ..tir import attr
from .c_family import CFamilyCodegen

_IDX = {"blockIdx": "get_group_id", "threadIdx": "get_local_id"}
_DIM = {"x": 0, "y": 1, "z": 2}


class OpenCLCodegen(CFamilyCodegen):
    target = "opencl"
    restrict = "restrict"
    shared_qualifier = "__local"
    global_qualifier = "__global "
    pointer_spaces = {attr.GLOBAL: "__global ", attr.SHARED: "__local "}
    helper_qualifier = "inline"
    int_types = {"int8": "char", "int16": "short", "int32": "int", "int64": "long", "uint8": "uchar",
                 "uint16": "ushort", "uint32": "uint", "uint64": "ulong", "bool": "bool"}
    float_types = {"float16": "half", "float32": "float", "float64": "double"}
    hoist_shared = True
    device_kernels = True
    vector_type_names = {"float32": "float", "float64": "double", "float16": "half", "int8": "char",
                         "uint8": "uchar", "int16": "short", "uint16": "ushort", "int32": "int",
                         "uint32": "uint", "int64": "long", "uint64": "ulong"}
    lane_names = tuple(f".s{k:x}" for k in range(16))

    def vector_load(self, vtype: str, lanes: int, ptr: str) -> str:
        return f"vload{lanes}(0, {ptr})"

    def vector_store_text(self, vtype: str, lanes: int, ptr: str, value: str) -> str:
        return f"vstore{lanes}({value}, 0, {ptr});"

    def vector_make(self, vtype: str, lanes) -> str:
        return f"(({vtype})({', '.join(lanes)}))"

    def thread_index(self, tag: str) -> str:
        kind, dim = tag.split(".")
        return f"((int){_IDX[kind]}({_DIM[dim]}))"

    def barrier(self) -> str:
        return "barrier(CLK_LOCAL_MEM_FENCE);"

    def int_const(self, e):
        if e.dtype == "int64":
            return f"((long){e.value}L)"
        return super().int_const(e)

    def header(self) -> str:
        out = ""
        if "float64" in self.uses_dtypes:
            out += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
        if "float16" in self.uses_dtypes:
            out += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n"
        return out

    def kernel_signature(self, name: str, params, block_threads) -> str:
        return f"__kernel void {name}({', '.join(params)})"
