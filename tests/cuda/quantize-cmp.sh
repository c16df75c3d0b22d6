#!/usr/bin/env bash
# tcq quantize --device cuda must write the same artifact as the CPU quantizer, byte for byte
# (the GPU encoder is bit-identical to the CPU one):
#   tests/cuda/quantize-cmp.sh TCQ MODEL_DIR WORK_DIR
# Quantizes MODEL_DIR (a small llama / qwen3 directory: tests/data/tiny_llama) at k = 2, 3, 4
# (k=3 also with --interleave and --refit-scales; k=2 with the lm_head at k=4) both ways and
# cmp's every output file.
set -u
tcq=$1 model=$2 work=$3
mkdir -p "$work"
n=0 bad=0
for opt in "--bits 2" "--bits 3" "--bits 4" "--bits 3 --interleave --refit-scales" "--bits 2 --lm-head-bits 4"; do
  tag=$(echo "$opt" | tr -d ' -')
  n=$((n + 1))
  t0=$(date +%s.%N)
  if ! "$tcq" quantize "$model" "$work/cpu_$tag" $opt --threads 4 >"$work/cpu_$tag.log" 2>&1; then
    echo "FAIL: cpu quantize $opt"; cat "$work/cpu_$tag.log"; bad=$((bad + 1)); continue
  fi
  t1=$(date +%s.%N)
  if ! "$tcq" quantize "$model" "$work/gpu_$tag" $opt --threads 4 --device cuda >"$work/gpu_$tag.log" 2>&1; then
    echo "FAIL: cuda quantize $opt"; cat "$work/gpu_$tag.log"; bad=$((bad + 1)); continue
  fi
  t2=$(date +%s.%N)
  same=1
  for f in "$work/cpu_$tag"/*; do
    g="$work/gpu_$tag/$(basename "$f")"
    if ! cmp "$f" "$g"; then same=0; fi
  done
  [ "$(ls "$work/cpu_$tag" | wc -l)" = "$(ls "$work/gpu_$tag" | wc -l)" ] || same=0
  if [ $same = 1 ]; then
    printf 'ok: quantize %-36s identical (cpu %s s, cuda %s s); %s\n' "$opt" "$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")" \
      "$(awk "BEGIN{printf \"%.1f\", $t2 - $t1}")" "$(tail -1 "$work/gpu_$tag.log" | cut -c1-90)"
  else
    echo "FAIL: quantize $opt: --device cuda output differs"; bad=$((bad + 1))
  fi
done
echo "quantize-cmp: $n checks, $bad failed"
[ $bad = 0 ]
