#!/usr/bin/env bash
# Instruction count per weight of the fast (int8) kernels, from their SASS (needs cuobjdump):
#   bench/cuda/fast-sass.sh [FILE]     (an executable or object holding them; default build-cuda/test_cuda)
# For each kernel below: the largest loop (a backward branch and its target) is the main loop;
# its opcode histogram and its instruction count divided by the weights one pass decodes per
# lane (reduce: one 64-position block; scatter: RG rows x NP columns) are printed.
set -u
file=${1:-build-cuda/test_cuda}
command -v cuobjdump >/dev/null 2>&1 || { echo "fast-sass: cuobjdump not found"; exit 0; }
#  k  mangled kernel name                                                                weights per loop pass (per lane)
kernels=(
  "2 _ZN8tcq_fast8k_reduceILi2ELi1ELb0EEEvN6tcq_tc3GeoES2_NS_3ActEPf 64"
  "2 _ZN8tcq_fast8k_reduceILi2ELi4ELb0EEEvN6tcq_tc3GeoES2_NS_3ActEPf 64"
  "2 _ZN8tcq_fast8k_reduceILi2ELi8ELb0EEEvN6tcq_tc3GeoES2_NS_3ActEPf 64"
  "3 _ZN8tcq_fast8k_reduceILi3ELi1ELb0EEEvN6tcq_tc3GeoES2_NS_3ActEPf 64"
  "2 _ZN8tcq_fast9k_scatterILi2ELi1EEEvN6tcq_tc3GeoENS_3ActENS_12ScatterSplitE 64"
  "2 _ZN8tcq_fast9k_scatterILi2ELi4EEEvN6tcq_tc3GeoENS_3ActENS_12ScatterSplitE 64"
  "2 _ZN8tcq_fast9k_scatterILi2ELi8EEEvN6tcq_tc3GeoENS_3ActENS_12ScatterSplitE 16"
  "3 _ZN8tcq_fast9k_scatterILi3ELi1EEEvN6tcq_tc3GeoENS_3ActENS_12ScatterSplitE 64"
)
for k in "${kernels[@]}"; do
  set -- $k
  [ -f "$file" ] || { echo "fast-sass: $file missing"; exit 0; }
  cuobjdump -sass -arch sm_90a -fun "$2" "$file" 2>/dev/null | awk -v name="$2" -v wpp="$3" '
    function hex(s,   i, v, c) {   # mawk has no strtonum
      v = 0; s = tolower(s); sub(/^0x/, "", s)
      for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + c }
      return v
    }
    /\/\*[0-9a-f]+\*\// {
      line = $0
      if (!match(line, /\/\*[0-9a-f]+\*\//)) next
      addr = hex(substr(line, RSTART + 2, RLENGTH - 4))
      rest = substr(line, RSTART + RLENGTH)
      gsub(/^[ \t]+/, "", rest)
      if (rest == "" || rest ~ /^\/\*/) next
      n = split(rest, tok, /[ \t]+/)
      op = tok[1]
      if (op ~ /^@/) op = tok[2]
      sub(/;$/, "", op)
      base = op; sub(/\..*/, "", base)
      cnt++; A[cnt] = addr; O[cnt] = base
      if (base == "BRA" && match(rest, /0x[0-9a-f]+/)) {
        tgt = hex(substr(rest, RSTART, RLENGTH))
        if (tgt < addr) { nl++; LS[nl] = tgt; LE[nl] = addr }
      }
    }
    END {
      best = 0; bs = 0; be = 0
      for (i = 1; i <= nl; i++) {
        c = 0
        for (j = 1; j <= cnt; j++) if (A[j] >= LS[i] && A[j] <= LE[i]) c++
        if (c > best) { best = c; bs = LS[i]; be = LE[i] }
      }
      for (j = 1; j <= cnt; j++) if (A[j] >= bs && A[j] <= be) H[O[j]]++
      printf "%s: %d instructions in the kernel, main loop %d = %.2f per weight (%d weights a pass):", name, cnt, best, best / wpp, wpp
      for (o in H) printf " %s=%d", o, H[o]
      printf "\n"
    }'
done
