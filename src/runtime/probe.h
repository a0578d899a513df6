// Brief measurements of a machine for `deltafin plan` (runtime/predict.h): how fast
// a disk serves random expert-sized reads, and how many weight bytes per second the
// CPU's matrix-product kernels get through for a type.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/result.h"

namespace deltafin {

struct DiskProbe {
  double bytes_per_second = 0;
  uint64_t reads = 0;
  bool direct = false;  // O_DIRECT (else buffered reads, pages dropped: see io/direct_file.h)
};

// Random aligned reads of `block` bytes anywhere in `path` from `in_flight` threads
// for about `seconds` (io/direct_file.h, the expert store's read path).
Result<DiskProbe> measure_disk_read(const std::string& path, uint64_t block, double seconds, int in_flight = 16);

// Weight bytes per second of matrix products of type `t` over `tokens` activation rows
// (bytes x tokens per second for tokens > 1) on `threads` threads (0: as the engine
// runs), for about `seconds`, one product per matrix of about `matrix_bytes` (the
// model's sizes: small matrices pay the threads' start and finish each); 0 when the
// type has no kernel.
double measure_weight_rate(DType t, int tokens, int threads, double seconds, uint64_t matrix_bytes);

}  // namespace deltafin
