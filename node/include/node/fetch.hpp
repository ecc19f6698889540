// The fetch phase on a shard node (query-then-fetch, as Elasticsearch's): the stored sources and
// highlight fragments of some documents of the shard, for a FetchRequest (proto/search.capnp).
//   - Sources come from ShardReader::GetSources, byte for byte as indexed. A shard that stores no
//     sources (ShardReader::has_sources() false: --no-source, import-ciff, generate) answers every
//     document with has_source false ("not stored") and no highlight: not an error.
//   - Highlights (core/highlight.hpp Highlight with the index's analyzer) are taken from the
//     source's "contents" field when the source parses as a JSON object whose "contents" is a string;
//     any other source gives no fragment.
//   - The answer stays under kFetchAnswerBudget bytes of sources and fragments: documents are kept
//     in request order while they fit, the rest marked omitted (a source may be up to 64 MiB, a
//     frame at most kMaxFrameBytes).
// Errors: InvalidArgument for a doc outside the shard; Corruption when a stored source block fails
// its checks (the caller reports it and degrades its health; no text is returned).
// Thread-safety: a pure function over a thread-safe ShardReader and an immutable Analyzer.
#pragma once

#include <vector>

#include "core/analyzer.hpp"
#include "core/status.hpp"
#include "proto/wire.hpp"

namespace search {

class ShardReader;

// Bytes of sources and fragments one fetch answer carries at most: the frame limit less room for
// the message's own structure (a few dozen bytes a document, 10,000 documents at most).
inline constexpr size_t kFetchAnswerBudget = kMaxFrameBytes - (size_t{1} << 20);

// One FetchedDocMsg per request.docs entry, in its order (source filled only when request.source).
Result<std::vector<FetchedDocMsg>> FetchDocs(const ShardReader& shard, const Analyzer& analyzer,
                                             const FetchRequestMsg& request);

}  // namespace search
