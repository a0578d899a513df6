// The registry of Hugging Face architectures and the {L}/{E} name patterns (hf_arch.h).
#include "format/hf_arch.h"

namespace deltafin {

const std::vector<const HfArch*>& hf_architectures() {
  static const std::vector<const HfArch*> all = {&hf_arch_qwen3moe(), &hf_arch_kimi_k3(), &hf_arch_deepseek2(),
                                                    &hf_arch_mixtral()};
  return all;
}

const HfArch* find_hf_arch_by_model_type(const std::string& t) {
  for (const HfArch* a : hf_architectures())
    if (a->model_type == t) return a;
  return nullptr;
}

const HfArch* find_hf_arch(const std::string& t, const std::string& container) {
  for (const HfArch* a : hf_architectures())
    if (a->model_type == t && (a->container_type.empty() || a->container_type == container)) return a;
  return nullptr;
}

const HfArch* find_hf_arch_by_gguf(const std::string& g) {
  for (const HfArch* a : hf_architectures())
    if (a->gguf_arch == g) return a;
  return nullptr;
}

std::string hf_model_type_list() {
  std::string s;
  for (const HfArch* a : hf_architectures())
    s += (s.empty() ? "" : ", ") +
         (a->container_type.empty() ? a->model_type : a->container_type + " (text_config " + a->model_type + ")");
  return s;
}

bool hf_name_match(const std::string& pat, const std::string& name, int* layer, int* expert) {
  *layer = -1;
  *expert = -1;
  size_t p = 0, n = 0;
  while (p < pat.size()) {
    if (pat.compare(p, 3, "{L}") == 0 || pat.compare(p, 3, "{E}") == 0) {
      int* out = pat[p + 1] == 'L' ? layer : expert;
      size_t q = n;
      while (q < name.size() && name[q] >= '0' && name[q] <= '9' && q - n < 9) ++q;
      if (q == n || (name[n] == '0' && q - n > 1)) return false;
      *out = std::stoi(name.substr(n, q - n));
      n = q;
      p += 3;
      continue;
    }
    if (n >= name.size() || name[n] != pat[p]) return false;
    ++n;
    ++p;
  }
  return n == name.size();
}

std::string hf_name_expand(const std::string& pat, int layer, int expert) {
  std::string out;
  for (size_t p = 0; p < pat.size(); ++p) {
    if (pat.compare(p, 3, "{L}") == 0) {
      out += std::to_string(layer);
      p += 2;
    } else if (pat.compare(p, 3, "{E}") == 0) {
      out += std::to_string(expert);
      p += 2;
    } else {
      out += pat[p];
    }
  }
  return out;
}

Result<int64_t> hf_config_int(const nlohmann::json& c, const char* field) {
  auto it = c.find(field);
  if (it == c.end() || !it->is_number_integer())
    return make_error("config.json: '{}' is {}; an integer is needed", field,
                      it == c.end() ? std::string("missing") : it->dump());
  return it->get<int64_t>();
}

Result<double> hf_config_float(const nlohmann::json& c, const char* field) {
  auto it = c.find(field);
  if (it == c.end() || !it->is_number())
    return make_error("config.json: '{}' is {}; a number is needed", field,
                      it == c.end() ? std::string("missing") : it->dump());
  return it->get<double>();
}

Status HfConfigWriter::put(const std::string& key, int64_t v, const char* field) const {
  if (v < 0 || v > int64_t(UINT32_MAX)) return make_error("config.json: '{}' is {}; out of range", field, v);
  m->set(prefix + key, GGUFValue::u32(uint32_t(v)));
  return {};
}

Status HfConfigWriter::u32(const std::string& key, const char* field) const {
  DF_ASSIGN(int64_t v, hf_config_int(c, field));
  return put(key, v, field);
}

Status HfConfigWriter::f32(const std::string& key, const char* field) const {
  DF_ASSIGN(double v, hf_config_float(c, field));
  m->set(prefix + key, GGUFValue::f32(float(v)));
  return {};
}

}  // namespace deltafin
