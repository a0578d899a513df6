#include "synth/synth.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <regex>

#include "core/aligned.h"
#include "format/gguf_writer.h"
#include "kernels/random_fill.h"
#include "kernels/types.h"
#include "model/registry.h"
#include "quant/dynamic_mix.h"

namespace deltafin {

DType fit_type(DType want, int64_t cols) {
  BlockGeometry g = block_geometry(want);
  return (g.block_elems && cols % g.block_elems == 0) ? want : DType::F32;
}

std::vector<float> synth_router_skew(const SynthSpec& s, int n_expert) {
  std::vector<float> off;
  if (s.skew <= 0) return off;
  // Offset log-popularity: a Gumbel-max choice with these offsets picks expert e
  // with probability proportional to (rank_e + 1)^-skew. Ranks are a seeded
  // permutation so popular experts are spread over the index range.
  std::vector<int> rank(static_cast<size_t>(n_expert));
  for (int e = 0; e < n_expert; ++e) rank[size_t(e)] = e;
  uint64_t st = s.seed * 0x9E3779B97F4A7C15ull + 7;
  for (int e = n_expert - 1; e > 0; --e) {
    st ^= st >> 12; st ^= st << 25; st ^= st >> 27;
    int j = int((st * 0x2545F4914F6CDD1Dull) % uint64_t(e + 1));
    std::swap(rank[size_t(e)], rank[size_t(j)]);
  }
  off.resize(size_t(n_expert));
  for (int e = 0; e < n_expert; ++e) off[size_t(e)] = -s.skew * std::log(float(rank[size_t(e)] + 1));
  return off;
}

namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A shared unit direction u (seeded): skewed routing adds offsets along u to the
// router rows and a component along u to every token embedding, so router logits
// gain per-expert offsets.
std::vector<float> skew_direction(uint64_t seed, int64_t n) {
  std::vector<float> u(static_cast<size_t>(n));
  fill_random(DType::F32, mix(seed, 0x5eed), n, 1.0f, u.data());
  double norm = 0;
  for (float v : u) norm += double(v) * v;
  for (float& v : u) v = float(v / std::sqrt(norm));
  return u;
}

// Fills `rows` rows of a tensor slice into dst.
void gen_rows(const TensorPlan& t, uint64_t seed, int64_t row0, int64_t rows, const std::vector<float>& u,
              void* dst) {
  const int64_t cols = t.shape[0];
  const uint64_t rb = dtype_row_bytes(t.type, uint64_t(cols));
  const bool needs_float =
      !t.row_dir.empty() || t.add_dir_all_rows || t.init != Init::Normal || !t.values.empty();
  if (!needs_float) {
    // Direct random blocks, one call per row range (fast path for big matrices).
    fill_random(t.type, mix(seed, uint64_t(row0)), rows * cols, t.std, dst);
    return;
  }
  std::vector<float> row(static_cast<size_t>(cols));
  const TypeTraits* tt = type_traits(t.type);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t gr = row0 + r;
    switch (t.init) {
      case Init::Zero: std::fill(row.begin(), row.end(), 0.0f); break;
      case Init::NormWeight:
        fill_random(DType::F32, mix(seed, uint64_t(gr)), cols, 0.1f, row.data());
        for (float& v : row) v += 1.0f;
        break;
      case Init::Bias:
      case Init::Normal: fill_random(DType::F32, mix(seed, uint64_t(gr)), cols, t.std, row.data()); break;
    }
    if (!t.values.empty())
      std::copy_n(t.values.begin() + gr * cols, cols, row.begin());
    if (t.add_dir_all_rows)
      for (int64_t c = 0; c < cols; ++c) row[size_t(c)] += u[size_t(c)] * 1.5f;
    if (!t.row_dir.empty())
      for (int64_t c = 0; c < cols; ++c) row[size_t(c)] += u[size_t(c)] * t.row_dir[size_t(gr % int64_t(t.row_dir.size()))];
    char* out = static_cast<char*>(dst) + uint64_t(r) * rb;
    if (t.type == DType::F32) std::memcpy(out, row.data(), size_t(cols) * 4);
    else tt->from_float(row.data(), out, cols);
  }
}

// The architecture's plan with the --tensor-type overrides applied.
Status make_plan(const SynthSpec& spec, SynthPlan* plan) {
  plan->meta.set("general.architecture", GGUFValue::str(spec.arch));
  plan->meta.set("general.name", GGUFValue::str(spec.name));
  plan->meta.set("general.alignment", GGUFValue::u32(32));
  const Architecture* arch = find_architecture(spec.arch);
  if (arch == nullptr) {
    std::string list;
    for (const Architecture& a : architectures()) list += fmt::format("{}{}", list.empty() ? "" : ", ", a.name);
    return make_error("synth: unknown architecture '{}' ({})", spec.arch, list);
  }
  if (spec.mix.empty()) {
    DF_TRY(arch->synth_plan(spec, plan));
  } else {
    // Planned at Q8_0, the matrices a quantized model quantizes are those not left
    // F32 (routers, norms, KDA's small tensors and rows no block fits stay F32).
    if (!is_dynamic_mix(spec.mix)) return make_error("synth: unknown --mix '{}'", spec.mix);
    SynthSpec at_q8 = spec;
    at_q8.type = at_q8.expert_type = DType::Q8_0;
    DF_TRY(arch->synth_plan(at_q8, plan));
    for (auto& t : plan->tensors)
      if (t.shape.size() >= 2 && (t.expert || t.type != DType::F32))
        t.type = dynamic_mix_fit(dynamic_mix_type(spec.mix, t.name), t.shape[0]);
  }
  for (const auto& o : spec.type_overrides) {
    std::regex re;
    try {
      re = std::regex(o.pattern);
    } catch (const std::regex_error& e) {
      return make_error("synth: bad --tensor-type pattern '{}': {}", o.pattern, e.what());
    }
    int hits = 0;
    for (auto& t : plan->tensors) {
      if (t.shape.size() < 2 || !std::regex_search(t.name, re)) continue;
      if (t.shape[0] % block_geometry(o.type).block_elems != 0)
        return make_error("synth: --tensor-type {}={}: tensor '{}' has {} columns, not a multiple of the {} block size",
                          o.pattern, dtype_name(o.type), t.name, t.shape[0], dtype_name(o.type));
      t.type = o.type;
      ++hits;
    }
    if (hits == 0) return make_error("synth: --tensor-type pattern '{}' matches no matrix of this model", o.pattern);
  }
  return {};
}

// Tensor data bytes of a plan, with the writer's 32-byte alignment per tensor.
uint64_t plan_data_bytes(const SynthPlan& plan) {
  uint64_t total = 0;
  for (const auto& t : plan.tensors) {
    int64_t rows = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) rows *= t.shape[d];
    total += (dtype_row_bytes(t.type, uint64_t(t.shape[0])) * uint64_t(rows) + 31) / 32 * 32;
  }
  return total;
}

// Tensor data bytes the spec's plan would write (the header, mostly the vocabulary,
// comes on top and does not grow with the expert count).
Result<uint64_t> planned_bytes(const SynthSpec& spec) {
  SynthPlan plan;
  DF_TRY(make_plan(spec, &plan));
  return plan_data_bytes(plan);
}

}  // namespace

Status fit_expert_count(SynthSpec* spec) {
  if (spec->target_bytes == 0) return {};
  if (spec->n_expert <= 0)
    return make_error("synth: --size needs a model with routed experts (this {} model has none)", spec->arch);
  // Experts must split into the groups and leave top-k (and the group rule) valid.
  const int step = std::max(spec->n_group, 1);
  int least = std::max({spec->n_used, 2 * step, step * ((spec->n_used + step - 1) / step)});
  SynthSpec probe = *spec;
  probe.n_expert = least;
  Result<uint64_t> smallest = planned_bytes(probe);
  while (!smallest.ok() && least < 4096) {  // e.g. group rules that want more experts per group
    least += step;
    probe.n_expert = least;
    smallest = planned_bytes(probe);
  }
  if (!smallest.ok()) return smallest.error();
  const uint64_t base = *smallest;
  probe.n_expert = least + step;
  DF_ASSIGN(const uint64_t more, planned_bytes(probe));
  const uint64_t per_step = more - base;  // every layer's experts and router rows
  if (per_step == 0) return make_error("synth: --size: the expert count does not change this model's size");
  if (spec->target_bytes < base)
    return make_error("synth: --size {:.1f} MiB is below the smallest {} model of these shapes ({} experts: {:.1f} MiB); "
                      "lower --layers, --embd or --expert-width", spec->target_bytes / 1048576.0, spec->arch, least,
                      base / 1048576.0);
  const uint64_t steps = (spec->target_bytes - base + per_step / 2) / per_step;  // nearest
  if (uint64_t(least) + steps * uint64_t(step) > uint64_t(1) << 20)
    return make_error("synth: --size {:.1f} GiB would need over a million experts per layer; raise --layers or "
                      "--expert-width", spec->target_bytes / 1073741824.0);
  spec->n_expert = least + int(steps) * step;
  return {};
}

Status synth_model(const SynthSpec& spec_in, const std::string& path, ThreadPool& pool, SynthReport* report) {
  auto t0 = std::chrono::steady_clock::now();
  SynthSpec spec = spec_in;
  DF_TRY(fit_expert_count(&spec));
  SynthPlan plan;
  DF_TRY(make_plan(spec, &plan));
  if (!spec.chat_template.empty()) plan.meta.set("tokenizer.chat_template", GGUFValue::str(spec.chat_template));

  GGUFWriter w(path);
  w.file() = plan.meta;
  for (const auto& t : plan.tensors) {
    GGUFTensorInfo ti;
    ti.name = t.name;
    ti.type = t.type;
    ti.n_dims = uint32_t(t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) ti.ne[d] = t.shape[d];
    if (t.shape[0] % block_geometry(t.type).block_elems != 0)
      return make_error("synth: tensor '{}' has {} columns, not a multiple of the {} block size",
                        t.name, t.shape[0], dtype_name(t.type));
    w.file().tensors.push_back(ti);
  }
  DF_TRY(w.begin());
  const std::vector<float> u = skew_direction(spec.seed, spec.n_embd);

  uint64_t expert_bytes = 0;
  for (size_t ti = 0; ti < plan.tensors.size(); ++ti) {
    const TensorPlan& t = plan.tensors[ti];
    const uint64_t seed = mix(spec.seed, ti + 1);
    const int64_t cols = t.shape[0];
    int64_t rows = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) rows *= t.shape[d];
    const uint64_t rb = dtype_row_bytes(t.type, uint64_t(cols));
    if (t.expert) expert_bytes += rb * uint64_t(rows);
    if (spec.sparse) {
      DF_TRY(w.write_data(nullptr, size_t(rb * uint64_t(rows))));
      continue;
    }
    // Generate in chunks of about 64 MiB, rows split over the threads.
    const int64_t chunk_rows = std::max<int64_t>(1, int64_t((64ull << 20) / std::max<uint64_t>(rb, 1)));
    AlignedBuffer buf(size_t(std::min(rows, chunk_rows)) * rb);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t n = std::min(chunk_rows, rows - r0);
      // Sub-blocks of 64 rows, each seeded by its first row: the data does not
      // depend on the thread count.
      pool.parallel_for((n + 63) / 64, 1, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t a = k * 64, m = std::min<int64_t>(64, n - a);
          gen_rows(t, seed, r0 + a, m, u, static_cast<char*>(buf.data()) + uint64_t(a) * rb);
        }
      });
      DF_TRY(w.write_data(buf.data(), size_t(uint64_t(n) * rb)));
    }
  }
  DF_TRY(w.finish());
  if (report) {
    report->bytes = w.bytes_written();
    report->expert_bytes = expert_bytes;
    report->n_expert = spec.n_expert;
    report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return {};
}

}  // namespace deltafin
