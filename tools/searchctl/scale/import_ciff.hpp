// ImportCiff: a CIFF file (ciff_format.hpp) in, a published index directory out, through
// PostingsIngest. The file is memory-mapped and read twice:
//  1. a validating pass over every message (header, every PostingsList with every posting, every
//     DocRecord, nothing after) that keeps each list's term and byte range, and each document's
//     length and DocRecord offset. DocRecords come after the postings in CIFF, but BM25 block
//     maxima need the lengths at encode time: this pass is what makes them available first.
//     Malformed input stops here with Corruption naming the byte offset; nothing is created.
//  2. the lists, sorted by term bytes (CIFF does not promise any order), are decoded from the
//     mapping on all threads and ingested; the documents follow with their collection_docid as
//     external id.
// Memory: ~32 bytes per term and 12 per document, plus the lists in flight; the file itself is
// paged in by the kernel. The index records the default analyzer, or --stem's stemmer: CIFF terms
// are already analyzed (an Anserini export of a stemmed Lucene index holds Porter stems), so
// queries must be analyzed the same way for terms to match.
// Thread-safety: ImportCiff may run concurrently for different outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analyzer.hpp"
#include "core/bm25.hpp"
#include "core/status.hpp"

namespace search {

struct CiffImportOptions {
  std::string input;
  std::string output;
  uint32_t shards = 1;
  uint32_t threads = 0;  // 0 = hardware threads
  bool force = false;
  AnalyzerConfig analyzer;  // recorded only: terms are taken as they are
  Bm25Params bm25;
  std::string created_by = "searchctl";
};

struct CiffImportSummary {
  uint64_t docs = 0, terms = 0, postings = 0, total_tokens = 0;
  uint64_t empty_lists = 0;  // PostingsLists without postings (no term in the index)
  uint64_t bytes = 0;        // the index's size on disk
  double seconds = 0;
  std::string description;   // the header's
  std::vector<std::string> notes;  // header totals that disagree with the contents, leftovers removed
};

// Errors: NotFound/IOError for the file; Corruption with a byte offset for malformed CIFF;
// InvalidArgument for unsupported input (a gzip file, version != 1, no documents, a term twice,
// more shards than documents); AlreadyExists when the output exists and !force. Nothing is
// changed at `output` on error.
Result<CiffImportSummary> ImportCiff(const CiffImportOptions& options);

}  // namespace search
