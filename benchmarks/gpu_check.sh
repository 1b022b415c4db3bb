#!/usr/bin/env bash
# The checks that need a GPU, in one run of a few minutes (issue 36), for a lent GPU machine:
#   1. the GPU tests (the compiled engine's CUDA target against its CPU target, CuPy profiles);
#   2. the simulator's speed on NumPy, the compiled engine's CPU target and its GPU target,
#      same cases, same run, with the ratios (benchmarks/sim_speed.py), and the ensemble
#      case (e) on each, with fewer requests (step "ensemble");
#   3. GPU profiles of the case study's three models, timed as Triton times an execution,
#      with and without CUDA graphs, and their checks (qmodel profile --backend cupy).
# Everything goes under one folder (default benchmarks/results/gpu-check), packed into
# gpu-check.tgz beside the text logs; run from the repository root:
#     bash benchmarks/gpu_check.sh [FOLDER]
# The device tool's machines hold numpy, scipy, numba-cuda and CuPy; qmodel runs from the
# checkout (PYTHONPATH), nothing is installed. Each step has its own time limit, so one
# that hangs leaves the others their time. STEPS="speed profiles" runs only those steps,
# WORKLOADS="item-tower" only those profiles, SPEED_BACKENDS="numpy,cpu" only those.
set -u
folder=${1:-benchmarks/results/gpu-check}
work=$(mktemp -d)
mkdir -p "$folder"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
steps=${STEPS:-tests speed ensemble profiles}
workloads=${WORKLOADS:-user-tower item-tower scoring}

{
    date -u +"%Y-%m-%d %H:%M UTC"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
        --format=csv 2>&1
    nproc
    $py -c "import numpy, numba, sys; print('python', sys.version.split()[0], 'numpy', \
numpy.__version__, 'numba', numba.__version__)" 2>&1
    $py -c "import cupy; print('cupy', cupy.__version__)" 2>&1
    git log -1 --format="qmodel at %h %s" 2>/dev/null
} > "$work/device.txt"
cat "$work/device.txt"

case " $steps " in *" tests "*)
echo "== 1. GPU tests"
# the CUDA-simulator test is left to machines without a GPU (it took most of 150 s on the
# H200 and the GPU agreement test, compiling five kernels twice, was cut off behind it)
timeout 270 $py -m pytest -q -rs -p no:cacheprovider -o addopts="" -m "not slow" \
    tests/test_compiled.py tests/test_profile.py \
    -k "(cuda or gpu or cupy) and not under_the_simulator" 2>&1 \
    | tee "$work/tests.txt" ;;
esac

case " $steps " in *" speed "*)
echo "== 2. simulator speed"
timeout 180 $py benchmarks/sim_speed.py --no-peers --repeat 1 --cases a,b,c \
    --backends "${SPEED_BACKENDS:-numpy,cpu,gpu}" \
    --big numpy=16000000,cpu=320000000,gpu=4000000000 2>&1 \
    | tee "$work/sim_speed.txt" ;;
esac

case " $steps " in *" ensemble "*)
echo "== 2e. simulator speed, ensemble case (e)"
timeout 150 $py benchmarks/sim_speed.py --no-peers --repeat 1 --cases e \
    --backends "${SPEED_BACKENDS:-numpy,cpu,gpu}" \
    --big numpy=4000000,cpu=64000000,gpu=400000000 2>&1 \
    | tee "$work/sim_speed_ensemble.txt" ;;
esac

case " $steps " in *" profiles "*)
echo "== 3. GPU profiles"
for workload in $workloads; do
    timeout 150 $py -m qmodel.cli profile --workload "$workload" --backend cupy --cuda-graph \
        --copies processes \
        --batch-sizes 1-64 --concurrency 1,2,4 --repeats 30 --warmup 3 \
        --out "$work/gpu-$workload.json" > "$work/profile-$workload.txt" 2>&1
    grep -E "^(check|concurrency|  fitted|error|item|user|scoring)" \
        "$work/profile-$workload.txt" | head -20
done ;;
esac

tar czf "$folder/gpu-check.tgz" -C "$work" .
cp "$work"/*.txt "$folder"/ 2>/dev/null
echo "wrote $folder"
