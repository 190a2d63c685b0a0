#!/usr/bin/env bash
# Runs a command under one family of OpenBLAS kernels, as a user's OPENBLAS_CORETYPE
# would; exits 77 (ctest: skipped) when this CPU cannot run them.
#   usage: with_blas_kernels.sh CORE COMMAND...    (CORE: Prescott, Haswell, Zen, SkylakeX, Cooperlake)
# XGRAD_EXPECTED_BLAS_CORE tells the determinism tests which kernels must be running, so
# that a family OpenBLAS did not take fails instead of passing on another.
set -euo pipefail
core=$1; shift
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
needs() {
  for flag; do
    [[ $flags == *" $flag "* ]] || { echo "skipped: $core kernels need $flag, which this CPU lacks"; exit 77; }
  done
}
case $core in
  Prescott) needs pni ;;  # SSE3
  Haswell | Zen) needs avx2 fma ;;
  SkylakeX) needs avx512f avx512bw avx512vl avx512dq avx512cd ;;
  Cooperlake) needs avx512f avx512bw avx512vl avx512dq avx512cd avx512_bf16 ;;
  *) echo "with_blas_kernels.sh: no CPU check for '$core' kernels" >&2; exit 2 ;;
esac
export OPENBLAS_CORETYPE=$core XGRAD_EXPECTED_BLAS_CORE=$core
exec "$@"
