#!/usr/bin/env bash
# TVM v0.8's test_target_codegen_cuda.py (imports rewritten only) and kbench's own CUDA tests of vector
# element types, on a GPU machine (the device tool), from the repository root:
#   bash scripts/device_tvm_codegen_cuda.sh TVM_TESTS
# TVM_TESTS: a folder holding TVM v0.8.0's tests/python (not part of the repository), e.g. made with
#   git -C <tvm mirror> archive v0.8.0 tests/python | tar -x -C TVM_TESTS
# Leaves the counts as JSON under $OUT (or kbench-out/device-tvm-cuda).
set -uo pipefail
tests=${1:?usage: bash scripts/device_tvm_codegen_cuda.sh TVM_TESTS}
out=${OUT:-kbench-out/device-tvm-cuda}
mkdir -p "$out"
nvidia-smi -L
echo "== TVM v0.8 unittest/test_target_codegen_cuda.py, imports only"
python3 scripts/tvm_tests.py "$tests" --group codegen-cuda --json "$out/codegen_cuda.json" \
  --pytest-arg=-rfE --pytest-arg=--tb=line 2>&1 | grep -v "^  " | tail -60
echo "== kbench: vector element types on CUDA"
python3 -m pytest -q tests/cpu/test_codegen_vector_dtypes.py 2>&1 | tail -5
