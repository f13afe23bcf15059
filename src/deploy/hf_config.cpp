// Hugging Face config.json of a decoder LLM -> ModelSpec. Every missing or malformed key is an error that names it.
#include <nlohmann/json.hpp>

#include "kernelkit/model_plan.hpp"

namespace kernelkit {

Status parse_hf_config(std::string_view json_text, std::string_view name, ModelSpec* out) {
  const std::string who = "config.json (" + std::string(name) + ")";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    return invalid_argument(who + ": not valid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
  if (!j.is_object()) return invalid_argument(who + ": expected a JSON object at the top level");
  auto integer = [&](const char* key, bool required, int64_t fallback, int64_t* v) -> Status {
    if (!j.contains(key) || j[key].is_null()) {
      if (required) return invalid_argument(who + ": missing \"" + key + "\" (a positive integer)");
      *v = fallback;
      return Status::Ok();
    }
    if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
      return invalid_argument(who + ": \"" + key + "\" must be a positive integer, got " + j[key].dump());
    *v = j[key].get<int64_t>();
    return Status::Ok();
  };
  auto boolean = [&](const char* key, bool fallback, bool* v) -> Status {
    if (!j.contains(key) || j[key].is_null()) {
      *v = fallback;
      return Status::Ok();
    }
    if (!j[key].is_boolean()) return invalid_argument(who + ": \"" + key + "\" must be true or false, got " + j[key].dump());
    *v = j[key].get<bool>();
    return Status::Ok();
  };
  ModelSpec m;
  m.key = std::string(name);
  m.name = std::string(name);
  m.source = "config.json";
  KK_RETURN_IF_ERROR(integer("hidden_size", true, 0, &m.hidden));
  KK_RETURN_IF_ERROR(integer("intermediate_size", true, 0, &m.intermediate));
  KK_RETURN_IF_ERROR(integer("num_hidden_layers", true, 0, &m.layers));
  KK_RETURN_IF_ERROR(integer("num_attention_heads", true, 0, &m.heads));
  KK_RETURN_IF_ERROR(integer("num_key_value_heads", false, m.heads, &m.kv_heads));
  KK_RETURN_IF_ERROR(integer("vocab_size", true, 0, &m.vocab));
  KK_RETURN_IF_ERROR(integer("max_position_embeddings", false, 0, &m.max_context));
  if (m.heads % m.kv_heads != 0)
    return invalid_argument(who + ": num_attention_heads (" + std::to_string(m.heads) +
                            ") must be a multiple of num_key_value_heads (" + std::to_string(m.kv_heads) + ")");
  const bool has_head_dim = j.contains("head_dim") && !j["head_dim"].is_null();
  if (!has_head_dim && m.hidden % m.heads != 0)
    return invalid_argument(who + ": hidden_size (" + std::to_string(m.hidden) +
                            ") is not a multiple of num_attention_heads and no \"head_dim\" is given");
  KK_RETURN_IF_ERROR(integer("head_dim", false, m.hidden / m.heads, &m.head_dim));
  KK_RETURN_IF_ERROR(boolean("tie_word_embeddings", false, &m.tied_embeddings));
  // Qwen2 has q/k/v biases without saying so in the config; Llama-style configs say attention_bias.
  const bool qwen2 = j.contains("model_type") && j["model_type"].is_string() && j["model_type"] == "qwen2";
  KK_RETURN_IF_ERROR(boolean("attention_bias", qwen2, &m.qkv_bias));
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace kernelkit
