#!/usr/bin/env bash
# tcq quantize --method ldlq --device cuda (issue 23: Hessians, LDL and BlockLDLQ products on the
# GPU) checked against the CPU quantizer and timed, in one device call.
#   tests/cuda/quantize-ldlq-on-device.sh pack BUILD_DIR DEST
#       tcq and test_quant_qla (xz), the shared libraries the device image lacks, tiny_llama (+ a character
#       tokenizer made on the device), tinyqwen cut to its first layer (../shared/data), the
#       Qwen3 tokenizer and bench/synth_qwen3_14b.py into DEST (under 30 MB)
#   tests/cuda/quantize-ldlq-on-device.sh run DEST [OUT_DIR]
#       on the device:
#       (0) test_quant_qla: the GPU's GEMM / SYRK / TRSM / Cholesky / proxy against CBLAS, and
#           BlockLDLQ + a pass on them (GPU encoder) against the CPU path on random matrices;
#       (a) per tiny model, k = 2: CPU and GPU LDLQ (BlockLDLQ + 1 pass) from the same calibration;
#           PASS when the saved Hessians agree to 1e-5 of each matrix's largest entry (the
#           calibration forward's projections in f32 and the double sums in cuBLAS' order:
#           test_quant_qla's CAL_BOUND), every tensor's proxy loss is within 5 % of the CPU's and their
#           sum within 1 % (the GPU path sums in other orders: the same algorithm, not the same
#           bits), the GPU
#           artifact is byte-identical on a second run (deterministic), and on tinyqwen the KL
#           against the bf16 model on text not used for calibration is within 5 % of the CPU
#           artifact's; whether the GPU artifact equals the CPU one byte for byte is printed.
#       (b) the synthetic Qwen3-14B geometry (bench/synth_qwen3_14b.py, random first layers),
#           --layers N (TCQ_Q14_LAYERS, default 2) with --device cuda, calibration of
#           TCQ_Q14_TOKENS (default 8192) tokens: seconds per layer (Hessians, each tensor) and a
#           40-layer estimate (TCQ_Q14_EXTRA: more quantize options, e.g. "--axis0-group 16";
#           TCQ_Q14_ENV="VAR=VALUE ...": the run again under that environment); then the CPU
#           quantizer on 1 layer under what time is left.
#       TCQ_QLA_PERF=1: first test_quant_qla --perf (a 14B projection's LDLQ phases, both axes).
#       Summary last; logs in OUT_DIR/logs.tgz.  Everything stays under 570 s.
set -u
mode=$1
shift
if [ "$mode" = pack ]; then
  bin=$1 dest=$2
  here=$(cd "$(dirname "$0")" && pwd)
  root=$here/../..
  shared=$root/../shared/data
  rm -rf "$dest"
  mkdir -p "$dest/data/tiny_llama" "$dest/data/tinyqwen1"
  for f in tcq test_quant_qla; do cp "$bin/$f" "$dest/$f" && strip "$dest/$f" && xz -9 -f -T2 "$dest/$f"; done
  . "$here/device-common.sh"
  pack_libs "$bin" "$dest"
  cp "$0" "$here/device-common.sh" "$dest/"
  cp "$root/bench/synth_qwen3_14b.py" "$dest/"
  cp "$root/tests/data/tiny_llama/config.json" "$root/tests/data/tiny_llama/model.safetensors" "$dest/data/tiny_llama/"
  # tinyqwen's first layer as one safetensors file (the embedding is tied: no lm_head)
  python3 - "$shared/tinyqwen" "$dest/data/tinyqwen1" 1 <<'PY'
import json, struct, sys, os
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
idx = json.load(open(os.path.join(src, "model.safetensors.index.json")))["weight_map"]
keep = sorted(k for k in idx if not k.startswith("model.layers.") or int(k.split(".")[2]) < n)
hdrs = {}
for f in set(idx[k] for k in keep):
    with open(os.path.join(src, f), "rb") as fh:
        ln = struct.unpack("<Q", fh.read(8))[0]
        hdrs[f] = (json.loads(fh.read(ln)), 8 + ln)
out, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
for k in keep:
    h, base = hdrs[idx[k]]
    a, b = h[k]["data_offsets"]
    with open(os.path.join(src, idx[k]), "rb") as fh:
        fh.seek(base + a)
        blobs.append(fh.read(b - a))
    out[k] = {"dtype": h[k]["dtype"], "shape": h[k]["shape"], "data_offsets": [off, off + b - a]}
    off += b - a
hb = json.dumps(out, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
with open(os.path.join(dst, "model.safetensors"), "wb") as fo:
    fo.write(struct.pack("<Q", len(hb)) + hb)
    for b in blobs:
        fo.write(b)
cfg = json.load(open(os.path.join(src, "config.json")))
cfg["num_hidden_layers"] = n
if isinstance(cfg.get("layer_types"), list):
    cfg["layer_types"] = cfg["layer_types"][:n]
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=1)
PY
  cp "$shared/tinyqwen/tokenizer.json" "$dest/data/tinyqwen1/"
  # valid.txt: the first 150 kB calibrate, the next 60 kB evaluate (disjoint)
  head -c 150000 "$shared/tinyqwen/valid.txt" >"$dest/data/calib.txt"
  tail -c +150001 "$shared/tinyqwen/valid.txt" | head -c 60000 >"$dest/data/eval.txt"
  xz -9 -T2 -c "$shared/tokenizers/qwen3/tokenizer.json" >"$dest/data/qwen3-tokenizer.json.xz"
  # bf16 weights: two-byte literals (lp=1, pb=1, lc=0) pack 4 % smaller than -9 alone
  xz -9e -T2 --lzma2=preset=9e,lc=0,lp=1,pb=1 "$dest/data/tinyqwen1/model.safetensors" "$dest/data/tiny_llama/model.safetensors"
  xz -9 -T2 "$dest/data/tinyqwen1/tokenizer.json" "$dest/data/calib.txt" "$dest/data/eval.txt"
  du -sb "$dest"
  exit 0
fi
dir=$1
out=${2:-${OUT:-/tmp/tcq-qldlq-out}}
mkdir -p "$out"
cd "$dir" || exit 1
t_start=$(date +%s)
left() { echo $(( 570 - ($(date +%s) - t_start) )); }
. ./device-common.sh
unpack tcq test_quant_qla
for f in data/tinyqwen1/model.safetensors data/tinyqwen1/tokenizer.json data/tiny_llama/model.safetensors \
    data/calib.txt data/eval.txt; do
  [ -f $f.xz ] && unxz $f.xz > $f && rm -f $f.xz
done
[ -f data/qwen3-tokenizer.json.xz ] && unxz data/qwen3-tokenizer.json.xz > data/qwen3-tokenizer.json
threads=$(nproc)
summary=()
pass=0 failn=0
verdict() {   # verdict OK|FAIL text
  if [ "$1" = OK ]; then pass=$((pass + 1)); summary+=("PASS: $2"); else failn=$((failn + 1)); summary+=("FAIL: $2"); fi
  echo "${summary[-1]}"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
w=work
rm -rf $w && mkdir -p $w
# tiny_llama gets the character tokenizer of tests/cli/quantize_ldlq.sh and a text it covers
{
  printf '{"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null, '
  printf '"post_processor": null, "decoder": null, "model": {"type": "BPE", "unk_token": "<unk>", '
  printf '"fuse_unk": false, "byte_fallback": false, "vocab": {"<unk>": 0, " ": 1'
  i=2
  for c in a b c d e f g h i j k l m n o p q r s t u v w x y z; do printf ', "%s": %d' "$c" $i; i=$((i + 1)); done
  printf '}, "merges": []}}\n'
} >data/tiny_llama/tokenizer.json
words="the quick brown fox jumps over a lazy dog while seven wizards quietly hex big jugs "
for i in $(seq 60); do printf '%s' "$words"; done >$w/tiny_calib.txt

# (0) the GPU linear algebra against CBLAS and the LDLQ on it against the CPU path (unit level)
timeout 120 ./test_quant_qla >"$out/qla.log" 2>&1
rc=$?
tail -4 "$out/qla.log"
if [ $rc = 0 ] && grep -q "the same on the GPU" "$out/qla.log"; then verdict OK "test_quant_qla on the GPU: $(tail -1 "$out/qla.log")"
else verdict FAIL "test_quant_qla (rc $rc): $(grep -m3 -E 'failed|CHECK|no GPU' "$out/qla.log" | tr '\n' ' ')"; fi

# perf mode (TCQ_QLA_PERF=1): a 14B projection's LDLQ costs, axis 1 and 0 (test_quant_qla --perf)
if [ "${TCQ_QLA_PERF:-0}" = 1 ]; then
  timeout 300 ./test_quant_qla --perf 17408 5120 "$threads" >"$out/perf.log" 2>&1
  rc=$?
  grep '^perf:' "$out/perf.log"
  summary+=("perf (rc $rc): $(grep '^perf:' "$out/perf.log" | sed 's/^perf: //' | tr '\n' ';')")
fi

# (a) GPU vs CPU LDLQ on the tiny models
proxies() { sed -n 's/^ *\(model\.layers\.[^ ]*\) *k=[0-9] proxy \([0-9.e+-]*\).*/\1 \2/p' "$1"; }
for spec in "tiny_llama $w/tiny_calib.txt 2048 128" "tinyqwen1 data/calib.txt 8192 256"; do
  set -- $spec
  m=$1 cal=$2 tok=$3 ctx=$4
  args=(--bits 2 --method ldlq --calib "$cal" --calib-tokens "$tok" --calib-ctx "$ctx" --threads "$threads")
  ok=1
  for run in cpu gpu gpu2; do
    dev=cpu; [ $run != cpu ] && dev=${TCQ_QLDLQ_DEV:-cuda}   # cpu: a dry run of this script without a GPU
    t0=$(date +%s.%N)
    save=(); [ $run != gpu2 ] && save=(--save-hessians $w/h_${m}_$run)
    timeout 150 ./tcq quantize data/$m $w/${m}_$run "${args[@]}" "${save[@]}" --device $dev >"$out/${m}_$run.log" 2>&1 || {
      verdict FAIL "$m: quantize --device $dev failed (rc $?): $(tail -1 "$out/${m}_$run.log")"; ok=0; }
    echo "$m $run: $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}") s" | tee -a "$out/times.txt"
  done
  [ $ok = 1 ] || continue
  # the Hessians: the GPU's (its SGEMM forward, DSYRK sums) against the CPU's, per layer and site
  hd=$(python3 - $w/h_${m}_cpu/hessians.bin $w/h_${m}_gpu/hessians.bin <<'PY'
import array, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
if a[:72] != b[:72]: print("header-differs"); sys.exit()
h = array.array("q", a[8:72]); n, dims = h[0], h[1:5]
x, y = array.array("d"), array.array("d")
x.frombytes(a[72:]); y.frombytes(b[72:])
off, worst = 0, 0.0
for l in range(n):
    for d in dims:
        s = slice(off, off + d * d); off += d * d
        m = max(abs(v) for v in x[s]) or 1.0
        worst = max(worst, max(abs(p - q) for p, q in zip(x[s], y[s])) / m)
print("%.3g" % worst)
PY
)
  if [[ $hd =~ ^[0-9.e+-]+$ ]] && awk "BEGIN{exit !($hd <= 1e-5)}"; then
    verdict OK "$m: GPU Hessians vs CPU: max |dH| / max |H| per site $hd (bound 1e-5)"
  else
    verdict FAIL "$m: GPU Hessians vs CPU: '$hd' (bound 1e-5)"
  fi
  proxies "$out/${m}_cpu.log" >$w/p_cpu
  proxies "$out/${m}_gpu.log" >$w/p_gpu
  cmp_out=$(join $w/p_cpu $w/p_gpu | awk 'BEGIN { wn = "-" } { n++; r = $3 / $2; d = r > 1 ? r - 1 : 1 - r; if (d > worst) { worst = d; wn = $1 }
      sc += $2; sg += $3 } END { printf "%d %.6f %.6f %s %.6g %.6g", n, worst, (sg / sc > 1 ? sg / sc - 1 : 1 - sg / sc), wn, sc, sg }')
  read -r n worst tot wn sc sg <<<"$cmp_out"
  echo "$m: $n tensors, worst per-tensor proxy difference $worst ($wn), sum $sg vs CPU $sc (rel $tot)"
  if [ "${n:-0}" -gt 0 ] && awk "BEGIN{exit !($worst <= 0.05 && $tot <= 0.01)}"; then
    verdict OK "$m: GPU LDLQ proxy loss vs CPU: $n tensors, worst $(awk "BEGIN{printf \"%.3f%%\", 100*$worst}"), sum $(awk "BEGIN{printf \"%.4f%%\", 100*$tot}") (bounds 5 %, 1 %)"
  else
    verdict FAIL "$m: GPU LDLQ proxy loss vs CPU: $n tensors, worst $worst ($wn), sum rel $tot (bounds 0.05, 0.01)"
  fi
  same=1
  for f in $w/${m}_gpu/*; do cmp -s "$f" "$w/${m}_gpu2/$(basename "$f")" || same=0; done
  if [ $same = 1 ]; then verdict OK "$m: GPU LDLQ artifact identical on a second run"; else verdict FAIL "$m: GPU LDLQ artifact differs between two runs"; fi
  bytes=identical
  for f in $w/${m}_cpu/*; do cmp -s "$f" "$w/${m}_gpu/$(basename "$f")" || bytes=different; done
  summary+=("info: $m: GPU vs CPU LDLQ artifact bytes: $bytes")
  if [ $m = tinyqwen1 ]; then
    for run in cpu gpu; do
      timeout 120 ./tcq kl $w/${m}_$run data/$m data/eval.txt --ctx 256 --windows 16 --threads "$threads" --json \
        >"$out/kl_$run.json" 2>"$out/kl_$run.err"
    done
    kc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mean_kl"])' "$out/kl_cpu.json" 2>/dev/null)
    kg=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mean_kl"])' "$out/kl_gpu.json" 2>/dev/null)
    if [ -n "$kc" ] && [ -n "$kg" ] && awk "BEGIN{d = $kg / $kc - 1; exit !(d <= 0.05 && d >= -0.05)}"; then
      verdict OK "$m: KL vs bf16 on held-out text: GPU $kg, CPU $kc (bound 5 %)"
    else
      verdict FAIL "$m: KL vs bf16: GPU '$kg', CPU '$kc' (kl_*.json / kl_*.err)"
    fi
  fi
done

# (b) the 14B geometry
L=${TCQ_Q14_LAYERS:-2} T=${TCQ_Q14_TOKENS:-8192}
df -h /tmp | tail -1 > "$out/disk.txt"
t0=$(date +%s)
if [ "${TCQ_Q14_SKIP:-0}" = 1 ]; then
  summary+=("synth: skipped (TCQ_Q14_SKIP=1)")
elif timeout $(( $(left) - 60 )) python3 synth_qwen3_14b.py /tmp/s14 data/qwen3-tokenizer.json "$L" >"$out/synth.log" 2>&1; then
  summary+=("synth: 14B geometry, $L random layers, $(( $(date +%s) - t0 )) s")
  cp data/calib.txt /tmp/s14/calib.txt
  q14=(/tmp/s14 /tmp/s14q --bits 2 --method ldlq --calib /tmp/s14/calib.txt --calib-tokens "$T" --calib-ctx 512
       --layers "$L" --threads "$threads" ${TCQ_Q14_EXTRA:-})
  # every output line stamped with the wall clock: a layer's period is the time between two
  # layers' "Hessians ready" (its tensors, the next layer's load, rotation and Hessians)
  tv=(); [ -x /usr/bin/time ] && tv=(/usr/bin/time -v)   # peak RSS where GNU time is installed
  q14_run() {   # LOG [VAR=VALUE ...]: one GPU quantize of the synthetic model under that environment
    local log=$1; shift
    local t0=$(date +%s)
    { env "$@" "${tv[@]}" timeout $(( $(left) - 30 )) ./tcq quantize "${q14[@]}" --device cuda 2>&1; echo "rc $?"; } |
      python3 -u -c 'import sys, time
for l in sys.stdin: print("%.2f %s" % (time.time(), l), end="", flush=True)' >"$out/$log"
    local rc=$(sed -n 's/^[0-9.]* rc //p' "$out/$log") el=$(( $(date +%s) - t0 ))
    grep -E "Hessians ready|k=2 proxy|weights coded|Maximum resident|Minor|System time|error|rc " "$out/$log" | tail -32
    local per=$(awk '/Hessians ready/ { l++; h[l] = $(NF - 1); at[l] = $1 } / k=2 proxy/ { t[l] += $(NF - 1) }
         END { for (i = 1; i <= l; i++) printf "layer %d: Hessians %.1f s, tensors %.1f s; ", i, h[i], t[i]
               if (l >= 2) printf "period %.1f s/layer -> 40 layers %.1f min", (at[l] - at[1]) / (l - 1), 40 * (at[l] - at[1]) / (l - 1) / 60 }' "$out/$log")
    summary+=("q14 gpu${*:+ ($*)}: rc $rc, $el s wall for $L layers (+ embedding / lm_head), calib $T tokens: $per")
    summary+=("q14 gpu: $(grep -E 'Maximum resident|Minor|System time' "$out/$log" | sed 's/^[0-9.]* *//' | tr '\n' ';')")
    rm -rf /tmp/s14q
  }
  q14_run q14_gpu.log
  # TCQ_Q14_ENV="VAR=VALUE ...": the same run again under that environment (an A/B in one call)
  [ -n "${TCQ_Q14_ENV:-}" ] && [ "$(left)" -gt 150 ] && q14_run q14_gpu_env.log ${TCQ_Q14_ENV}
  rm -rf /tmp/s14q
  if [ "$(left)" -gt 90 ] && [ "${TCQ_Q14_CPU:-1}" = 1 ]; then
    t0=$(date +%s)
    q14c=(/tmp/s14 /tmp/s14q --bits 2 --method ldlq --calib /tmp/s14/calib.txt --calib-tokens "$T" --calib-ctx 512
          --layers 1 --threads "$threads")
    timeout $(( $(left) - 20 )) ./tcq quantize "${q14c[@]}" >"$out/q14_cpu.log" 2>&1
    rc=$?
    per=$(awk '/Hessians ready/ { h = $(NF - 1) } /k=2 proxy/ { t += $(NF - 1); n++ } END { printf "Hessians %s s, %d tensors %.1f s", h, n, t }' "$out/q14_cpu.log")
    summary+=("q14 cpu 1 layer: rc $rc (124: timed out), $(( $(date +%s) - t0 )) s wall: $per")
    grep -E "Hessians ready|k=2 proxy" "$out/q14_cpu.log" | tail -10
  fi
else
  summary+=("synth: failed or timed out (synth.log)")
fi
rm -rf /tmp/s14 /tmp/s14q $w
(cd "$out" && tar czf logs.tgz --exclude=logs.tgz *.log *.txt *.json *.err 2>/dev/null && rm -f *.log *.err *.json)
echo "==== summary ($(date -u +%FT%TZ), $(cat "$out/gpu.txt" 2>/dev/null), $(( $(date +%s) - t_start )) s)"
printf '%s\n' "${summary[@]}"
echo "quantize-ldlq-on-device: $pass passed, $failn failed"
[ $failn = 0 ]
