"""Write a suite of the float32 ragged matrix products (4000 x 3000 x 1000 and 3000 x 2000 x 1500) over a
grid of unpipelined `shared_blocked` tiles (pipelined kernels stay whole: kernels.lower.block_partition),
each shape with torch.matmul (TF32 off) as its peer, for scripts/device_suite_subset.sh:

    python3 scripts/ragged_grid_suite.py OUT.toml && MATCH= bash scripts/device_suite_subset.sh OUT.toml
"""

import itertools
import sys

SHAPES = ((4000, 3000, 1000), (3000, 2000, 1500))
LOCAL = ((8, 8), (8, 4), (4, 8), (4, 4))
TILE_K = (8, 16, 32)
REG_CACHE = (0, 1)

head = """[suite]
name = "ragged-sgemm-grid"
description = "ragged float32 products over unpipelined shared_blocked tiles, against torch.matmul (TF32 off)"
targets = ["cuda"]
timeout_s = 300

[measure]
min_time_s = 0.3
max_time_s = 0.6
"""
blocks = []
for n, m, k in SHAPES:
    variants = []
    for (ly, lx), tk, rc in itertools.product(LOCAL, TILE_K, REG_CACHE):
        variants.append(f'    {{ name = "shared_blocked", knobs = {{ local_y = [{ly}], local_x = [{lx}], block_y = [16], '
                        f'block_x = [16], tile_k = [{tk}], reg_cache = [{rc}] }} }},')
    blocks.append(f'\n[[workload]]\nname = "matmul"\nparams = {{ n = [{n}], m = [{m}], k = [{k}] }}\n'
                  f'dtypes = ["float32"]\nvariants = [\n' + "\n".join(variants) +
                  '\n]\npeers = ["torch.matmul(tf32=off)"]\n')
open(sys.argv[1], "w").write(head + "".join(blocks))
