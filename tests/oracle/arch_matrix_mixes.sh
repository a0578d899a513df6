#!/usr/bin/env bash
# The dynamic-quant mixes as whole models against llama.cpp: arch_matrix.sh's cells
# for TYPES=$MIXES (IQ1_S_DYN and Q2_K_DYN on every architecture, IQ2_XXS_DYN on
# kimi-k3), in a directory of their own so that both scripts can run at once.
# usage: arch_matrix_mixes.sh DELTAFIN SOURCE_DIR BUILD_DIR
here=$(cd "$(dirname "$0")" && pwd)
TYPES=${TYPES:-"IQ1_S_DYN IQ2_XXS_DYN Q2_K_DYN"} ARCH_MATRIX_DIR=${ARCH_MATRIX_DIR:-$3/arch_matrix_mixes} \
  exec bash "$here/arch_matrix.sh" "$@"
