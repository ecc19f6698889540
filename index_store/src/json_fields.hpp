// Internal to index_store: checked field access for the JSON documents of the index (the
// manifest and the shard metadata). Every accessor returns Corruption naming the document and the
// field when it is missing or has the wrong type or range; nothing throws.
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/status.hpp"

namespace search::store {

using Json = nlohmann::json;

inline Status FieldError(const std::string& where, const char* key, const char* what) {
  return Status::Corruption(where + ": field '" + key + "' " + what);
}

inline Result<const Json*> GetField(const Json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) return Status::Corruption(where + ": expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) return FieldError(where, key, "is missing");
  return &*it;
}

inline Result<uint64_t> GetUint(const Json& obj, const char* key, const std::string& where,
                                uint64_t max = std::numeric_limits<uint64_t>::max()) {
  SEARCH_ASSIGN_OR_RETURN(const Json* v, GetField(obj, key, where));
  if (!v->is_number_unsigned()) return FieldError(where, key, "must be a non-negative integer");
  const uint64_t x = v->get<uint64_t>();
  if (x > max) return FieldError(where, key, ("must be <= " + std::to_string(max)).c_str());
  return x;
}

inline Result<double> GetDouble(const Json& obj, const char* key, const std::string& where) {
  SEARCH_ASSIGN_OR_RETURN(const Json* v, GetField(obj, key, where));
  if (!v->is_number()) return FieldError(where, key, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x)) return FieldError(where, key, "must be finite");
  return x;
}

inline Result<bool> GetBool(const Json& obj, const char* key, const std::string& where) {
  SEARCH_ASSIGN_OR_RETURN(const Json* v, GetField(obj, key, where));
  if (!v->is_boolean()) return FieldError(where, key, "must be true or false");
  return v->get<bool>();
}

inline Result<std::string> GetString(const Json& obj, const char* key, const std::string& where) {
  SEARCH_ASSIGN_OR_RETURN(const Json* v, GetField(obj, key, where));
  if (!v->is_string()) return FieldError(where, key, "must be a string");
  return v->get<std::string>();
}

inline Result<const Json*> GetObject(const Json& obj, const char* key, const std::string& where) {
  SEARCH_ASSIGN_OR_RETURN(const Json* v, GetField(obj, key, where));
  if (!v->is_object()) return FieldError(where, key, "must be an object");
  return v;
}

// Shortest decimal that reads back as the same float (0.9f -> 0.9), so JSON stays readable.
double FloatForJson(float v);

inline Json StatsToJson(const CollectionStats& s) {
  return Json{{"num_docs", s.num_docs}, {"total_tokens", s.total_tokens}, {"avgdl", s.avgdl()}};
}
inline Json Bm25ToJson(const Bm25Params& p) {
  return Json{{"k1", FloatForJson(p.k1)}, {"b", FloatForJson(p.b)}};
}

// {"num_docs","total_tokens","avgdl"}; avgdl must agree with total_tokens / num_docs.
Result<CollectionStats> StatsFromJson(const Json& obj, const std::string& where);
// {"k1" > 0 finite, "b" in [0, 1]}.
Result<Bm25Params> Bm25FromJson(const Json& obj, const std::string& where);
// The object written by AnalyzerConfig::ToJson, embedded.
// The error for an index of another format version `version` (InvalidArgument), prefixed by
// `where`: says which version this build reads and, for an older index, that it must be rebuilt.
Status FormatVersionMismatch(std::string_view where, uint64_t version);

Json AnalyzerToJson(const AnalyzerConfig& config);
Result<AnalyzerConfig> AnalyzerFromJson(const Json& obj, const std::string& where);

}  // namespace search::store
