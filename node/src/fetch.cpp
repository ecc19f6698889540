// FetchDocs (see node/fetch.hpp).
#include "node/fetch.hpp"

#include <nlohmann/json.hpp>

#include "core/highlight.hpp"
#include "index_store/shard_store.hpp"

namespace search {
namespace {

// The fragments of a source's "contents" string (none when it has no such field or does not parse).
std::vector<std::string> HighlightSource(const std::string& source, const Analyzer& analyzer,
                                         const HighlightTerms& terms) {
  // nlohmann's parser is iterative: deep nesting cannot overflow the stack.
  const nlohmann::json doc = nlohmann::json::parse(source, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return {};
  const auto it = doc.find("contents");
  if (it == doc.end() || !it->is_string()) return {};
  return Highlight(it->get_ref<const std::string&>(), analyzer, terms);
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
