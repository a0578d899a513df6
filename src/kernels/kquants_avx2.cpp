// AVX2 dot products of the K-quants (kernels in kquants_x86.h).
#include "kernels/kernels_impl.h"
#include "kernels/kquants_x86.h"

namespace deltafin::kern {

void install_kquants_avx2(TypeTraits* t) {
  auto set = [&](DType type, VecDotFn dot, VecDotX4Fn dot4) {
    TypeTraits& r = t[uint32_t(type)];
    r.vec_dot = dot;
    r.vec_dot_x4 = dot4;
    r.vec_dot_r4 = nullptr;  // see types.h: no r4 kernel of this set yet
    r.isa = Isa::AVX2;
  };
  set(DType::Q4_K, one<dot_q45k<4, 1>>, dot_q45k<4, 4>);
  set(DType::Q5_K, one<dot_q45k<5, 1>>, dot_q45k<5, 4>);
  set(DType::Q6_K, one<dot_q6k<1>>, dot_q6k<4>);
  set(DType::Q2_K, one<dot_q2k<1>>, dot_q2k<4>);
  set(DType::Q3_K, one<dot_q3k<1>>, dot_q3k<4>);
}

}  // namespace deltafin::kern
