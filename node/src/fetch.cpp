// FetchDocs (see node/fetch.hpp).
#include "node/fetch.hpp"

#include <nlohmann/json.hpp>
#include <optional>

#include "core/highlight.hpp"
#include "index_store/shard_store.hpp"

namespace search {
namespace {

// Finds the top-level "contents" string of a JSON object without building the document: SAX events,
// stopped as soon as the string is seen (the rest of the source is neither parsed nor copied).
class ContentsFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::optional<std::string> contents;

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool string(string_t& s) override {
    if (depth_ == 1 && at_contents_) {
      contents = std::move(s);
      return false;  // found: stop
    }
    return Value();
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0 && seen_root_) return false;
    seen_root_ = true;
    ++depth_;
    at_contents_ = false;
    return true;
  }
  bool key(string_t& k) override {
    at_contents_ = depth_ == 1 && k == "contents";
    return true;
  }
  bool end_object() override {
    --depth_;
    at_contents_ = false;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return false;  // the root is not an object
    ++depth_;
    at_contents_ = false;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool Value() {
    if (depth_ == 0) return false;  // the root is not an object
    at_contents_ = false;           // a "contents" that is not a string gives no highlight
    return true;
  }
  int depth_ = 0;
  bool seen_root_ = false;
  bool at_contents_ = false;
};

// The fragments of a source's top-level "contents" string (none when it has no such field, the field
// is not a string, or the source is not a JSON object).
std::vector<std::string> HighlightSource(const std::string& source, const Analyzer& analyzer,
                                         const HighlightTerms& terms) {
  ContentsFinder finder;
  // nlohmann's SAX parser is iterative: deep nesting cannot overflow the stack.
  (void)nlohmann::json::sax_parse(source, &finder, nlohmann::json::input_format_t::json, /*strict=*/false);
  if (!finder.contents) return {};
  return Highlight(*finder.contents, analyzer, terms);
}

}  // namespace

Result<std::vector<FetchedDocMsg>> FetchDocs(const ShardReader& shard, const Analyzer& analyzer,
                                             const FetchRequestMsg& request) {
  const ShardMeta& meta = shard.meta();
  for (uint32_t d : request.docs)
    if (d < meta.doc_begin || d >= meta.doc_end) {
      return Status::InvalidArgument("doc " + std::to_string(d) + " is not in shard " + std::to_string(meta.shard_id) +
                                     " [" + std::to_string(meta.doc_begin) + ", " + std::to_string(meta.doc_end) + ")");
    }
  std::vector<FetchedDocMsg> out(request.docs.size());
  for (size_t i = 0; i < out.size(); ++i) out[i].doc = request.docs[i];
  const bool highlight = request.highlight && !(request.highlight_terms.empty() && request.highlight_phrases.empty());
  if (!shard.has_sources() || (!request.source && !highlight)) return out;
  std::vector<std::string> sources;
  SEARCH_RETURN_IF_ERROR(shard.GetSources(request.docs, &sources));
  if (sources.size() != out.size()) {
    return Status::Internal("GetSources returned " + std::to_string(sources.size()) + " sources for " +
                            std::to_string(out.size()) + " docs");
  }
  const HighlightTerms terms{request.highlight_terms, request.highlight_phrases};
  size_t bytes = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    FetchedDocMsg& d = out[i];
    d.has_source = true;
    if (highlight) d.highlights = HighlightSource(sources[i], analyzer, terms);
    if (request.source) d.source = std::move(sources[i]);
    size_t size = d.source.size();
    for (const auto& f : d.highlights) size += f.size();
    if (bytes + size > kFetchAnswerBudget) {  // later (lower ranked) documents may still fit
      d.omitted = true;
      d.source.clear();
      d.highlights.clear();
      continue;
    }
    bytes += size;
  }
  return out;
}

}  // namespace search
