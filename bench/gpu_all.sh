#!/usr/bin/env bash
# Every GPU figure the docs name, in one run on a lent CUDA machine (docs/gpu.md): each bench under its own time
# limit, its output kept in OUT/NAME.log. Usage: bash bench/gpu_all.sh OUT [NAME ...] (default: all, in this order:
# the newest code's figures first, so a short lease measures what changed).
set -u
cd "$(dirname "$0")/.."
out=${1:-gpu-out}
shift || true
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
python3 -c "import attention" || exit 1

declare -A cmd=(
  [open_vocabulary]="python3 -m bench.bench_open_vocabulary --device cuda"
  [gpu]="python3 -m bench.bench_gpu --repeats 10"
  [backbones]="python3 -m bench.bench_backbones --device cuda"
  [text_relevance]="python3 -m bench.bench_text_relevance --device cuda"
  [extract]="python3 -m bench.bench_extract_many --device cuda --no-torchrun"
)
declare -A limit=([open_vocabulary]=180 [gpu]=150 [backbones]=120 [text_relevance]=100 [extract]=120)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(open_vocabulary gpu backbones text_relevance extract)
for name in "${names[@]}"; do
  echo "=== $name: ${cmd[$name]} (at most ${limit[$name]} s)"
  start=$(date +%s)
  timeout "${limit[$name]}" ${cmd[$name]} 2>&1 | tee "$out/$name.log"
  echo "=== $name: exit ${PIPESTATUS[0]} after $(($(date +%s) - start)) s"
done
