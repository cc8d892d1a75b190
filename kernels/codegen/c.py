"""C99 dialect (host CPU; ``parallel`` loops use OpenMP)."""

from __future__ import annotations

from ..errors import BuildError
from ..tir.expr import IntImm
from ..tir.stmt import Allocate, For, ForKind
from .c_family import CFamilyCodegen

HEADER = "#include <stdint.h>\n#include <stdbool.h>\n#include <stdlib.h>\n#include <math.h>\n"
# where the runtime links glibc's vector math library it defines KB_VECTOR_MATH: SIMD variants of
# these functions exist, so GCC vectorizes loops that call them (kernels.runtime.c.vector_math_flags)
HEADER += (
    "#ifdef KB_VECTOR_MATH\n"
    + "".join(f"__attribute__((simd(\"notinbranch\"))) {t} {name} ({t});\n"
              for t, names in (("float", ("expf", "logf", "sinf", "cosf")),
                               ("double", ("exp", "log", "sin", "cos")))
              for name in names)
    + "__attribute__((simd(\"notinbranch\"))) float powf (float, float);\n"
    + "__attribute__((simd(\"notinbranch\"))) double pow (double, double);\n"
    + "#endif\n"
)
STACK_LIMIT = 4096  # elements; larger or symbolic temporaries live on the heap


class CCodegen(CFamilyCodegen):
    target = "c"
    restrict = "restrict"

    def thread_index(self, tag: str) -> str:
        raise BuildError(f"target c cannot run GPU thread indices ({tag}); build this schedule for cuda "
                         "or opencl, or remove the bind() calls")

    def loop_pragma(self, s: For) -> str:
        if s.kind == ForKind.PARALLEL:
            self.uses_openmp = True
            return "#pragma omp parallel for"
        if s.kind == ForKind.VECTORIZED:
            return "#pragma GCC ivdep"
        if s.kind == ForKind.UNROLLED:
            return "#pragma GCC unroll 16"
        return ""

    def allocate(self, s: Allocate, ind: int) -> None:
        b = s.buffer
        name = self.buffer_name(b)
        t = self.type_str(b.dtype)
        if isinstance(s.extent, IntImm) and s.extent.value <= STACK_LIMIT:
            self.emit(ind, f"{t} {name}[{s.extent.value}];")
            self.stmt(s.body, ind)
            return
        self.emit(ind, "{")
        self.emit(ind + 1, f"{t}* {name} = ({t}*)malloc(sizeof({t}) * (size_t)({self.expr(s.extent)}));")
        self.stmt(s.body, ind + 1)
        self.emit(ind + 1, f"free({name});")
        self.emit(ind, "}")

    def header(self) -> str:
        return HEADER

    def kernel_signature(self, name: str, params, block_threads) -> str:
        return f"void {name}({', '.join(params)})"
