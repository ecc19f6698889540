// ImportCiff (import_ciff.hpp).
#include "scale/import_ciff.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <string_view>

#include "index_store/postings_ingest.hpp"
#include "indexer/build_dir.hpp"
#include "scale/ciff_format.hpp"
#include "scale/generate_index.hpp"

namespace search {

namespace {

// A read-only private mapping of a whole regular file.
class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      const std::string msg = "open " + path + ": " + std::strerror(err);
      return err == ENOENT ? Status::NotFound(msg) : Status::IOError(msg);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const std::string msg = "stat " + path + ": " + std::strerror(errno);
      ::close(fd);
      return Status::IOError(msg);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(path + " is not a regular file (CIFF import maps the file; no pipes)");
    }
    MappedFile f;
    f.size_ = static_cast<size_t>(st.st_size);
    if (f.size_ > 0) {
      void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const std::string msg = "mmap " + path + ": " + std::strerror(errno);
        ::close(fd);
        return Status::IOError(msg);
      }
      f.data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return f;
  }
  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  void Advise(int advice) const {
    if (data_ != nullptr) (void)::madvise(const_cast<uint8_t*>(data_), size_, advice);
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct ListEntry {
  std::string_view term;  // into the mapping
  CiffSpan body;
};

std::string Quote(std::string_view s) {
  std::string out(1, '\'');
  out.append(s.substr(0, 64)).append(s.size() > 64 ? "...'" : "'");
  return out;
}

}  // namespace

Result<CiffImportSummary> ImportCiff(const CiffImportOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (options.input.empty()) return Status::InvalidArgument("no CIFF file given");
  if (options.output.empty()) return Status::InvalidArgument("no output directory given");
  if (options.shards == 0) return Status::InvalidArgument("--shards must be at least 1");
  SEARCH_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(options.input));
  const std::span<const uint8_t> bytes = file.bytes();
  if (bytes.empty()) return Status::InvalidArgument(options.input + " is empty");
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b)
    return Status::InvalidArgument(options.input + " is gzip-compressed: decompress it first (gunzip -k)");
  file.Advise(MADV_SEQUENTIAL);

  // 1. Validate everything; keep the lists' places and the documents' lengths.
  CiffImportSummary summary;
  uint64_t pos = 0;
  SEARCH_ASSIGN_OR_RETURN(CiffSpan header_span, ReadCiffDelimited(bytes, &pos, "Header"));
  SEARCH_ASSIGN_OR_RETURN(CiffHeader header, ParseCiffHeader(bytes, header_span));
  if (header.version != 1)
    return Status::InvalidArgument("CIFF version " + std::to_string(header.version) + " (this reader knows version 1)");
  if (header.num_docs <= 0) return Status::InvalidArgument("the CIFF header declares no documents");
  if (header.num_postings_lists < 0)
    return Status::Corruption("the CIFF header declares " + std::to_string(header.num_postings_lists) + " postings lists");
  const auto num_docs = static_cast<uint64_t>(header.num_docs);
  const auto num_lists = static_cast<uint64_t>(header.num_postings_lists);
  summary.description = header.description;

  std::vector<ListEntry> lists;
  lists.reserve(std::min<uint64_t>(num_lists, bytes.size() / 4));  // a corrupt count cannot reserve much
  uint64_t postings = 0;
  for (uint64_t i = 0; i < num_lists; ++i) {
    const uint64_t at = pos;
    auto body = ReadCiffDelimited(bytes, &pos, "PostingsList");
    if (!body.ok())
      return body.status().WithContext("PostingsList " + std::to_string(i) + " of " + std::to_string(num_lists));
    std::string_view term;
    uint64_t count = 0;
    Status s = ParseCiffPostingsList(bytes, *body, num_docs, &term, nullptr, nullptr, &count);
    if (!s.ok()) return s.WithContext("PostingsList " + std::to_string(i) + " of " + std::to_string(num_lists));
    if (count == 0) {
      ++summary.empty_lists;
      continue;
    }
    if (term.empty())
      return Status::InvalidArgument("PostingsList " + std::to_string(i) + " at byte " + std::to_string(at) +
                                     " has an empty term");
    lists.push_back(ListEntry{term, *body});
    postings += count;
  }
  // Every DocRecord takes at least one byte (its length prefix): a header claiming more documents
  // than the bytes left can hold is corrupt, refused before anything is sized by it.
  if (num_docs > bytes.size() - std::min<uint64_t>(pos, bytes.size())) {
    return Status::Corruption("CIFF header: num_docs " + std::to_string(num_docs) + " but only " +
                              std::to_string(bytes.size() - std::min<uint64_t>(pos, bytes.size())) +
                              " bytes of DocRecords follow");
  }
  std::vector<uint32_t> lengths(num_docs, 0);
  std::vector<uint64_t> record_at(num_docs, UINT64_MAX);  // offset of each doc's delimited DocRecord
  for (uint64_t j = 0; j < num_docs; ++j) {
    const uint64_t at = pos;
    auto body = ReadCiffDelimited(bytes, &pos, "DocRecord");
    if (!body.ok()) return body.status().WithContext("DocRecord " + std::to_string(j) + " of " + std::to_string(num_docs));
    auto rec = ParseCiffDocRecord(bytes, *body, num_docs);
    if (!rec.ok()) return rec.status().WithContext("DocRecord " + std::to_string(j) + " of " + std::to_string(num_docs));
    if (record_at[rec->docid] != UINT64_MAX)
      return Status::Corruption("CIFF DocRecord at byte " + std::to_string(at) + ": docid " + std::to_string(rec->docid) +
                                " appears twice (first at byte " + std::to_string(record_at[rec->docid]) + ")");
    record_at[rec->docid] = at;
    lengths[rec->docid] = rec->doclength;
  }
  if (pos != bytes.size())
    return Status::Corruption("CIFF: " + std::to_string(bytes.size() - pos) + " bytes after the last DocRecord, at byte " +
                              std::to_string(pos));
  if (options.shards > num_docs)
    return Status::InvalidArgument(std::to_string(options.shards) + " shards for " + std::to_string(num_docs) +
                                   " documents: every shard needs at least one document");
  auto by_term = [](const ListEntry& a, const ListEntry& b) { return a.term < b.term; };
  if (!std::is_sorted(lists.begin(), lists.end(), by_term)) std::sort(lists.begin(), lists.end(), by_term);
  for (size_t i = 1; i < lists.size(); ++i) {
    if (lists[i].term == lists[i - 1].term)
      return Status::InvalidArgument("CIFF term " + Quote(lists[i].term) + " has two PostingsLists (at bytes " +
                                     std::to_string(std::min(lists[i - 1].body.begin, lists[i].body.begin)) + " and " +
                                     std::to_string(std::max(lists[i - 1].body.begin, lists[i].body.begin)) + ")");
  }
  uint64_t total_tokens = 0;
  for (uint32_t len : lengths) total_tokens += len;
  if (header.total_docs != header.num_docs)
    summary.notes.push_back("header total_docs " + std::to_string(header.total_docs) + " differs from num_docs " +
                            std::to_string(header.num_docs) + "; the index uses the " + std::to_string(num_docs) +
                            " documents in the file");
  if (header.total_postings_lists != header.num_postings_lists)
    summary.notes.push_back("header total_postings_lists " + std::to_string(header.total_postings_lists) +
                            " differs from num_postings_lists " + std::to_string(header.num_postings_lists));
  if (header.total_terms_in_collection != static_cast<int64_t>(total_tokens))
    summary.notes.push_back("header total_terms_in_collection " + std::to_string(header.total_terms_in_collection) +
                            " differs from the sum of doclengths " + std::to_string(total_tokens) +
                            "; BM25 uses the doclengths");
  // average_doclength is optional (0: absent); exporters round it, so only a real difference is noted.
  const double avgdl = static_cast<double>(total_tokens) / static_cast<double>(num_docs);
  if (header.average_doclength != 0 && !(std::abs(header.average_doclength - avgdl) <= 1e-6 * std::max(1.0, avgdl))) {
    char line[160];
    std::snprintf(line, sizeof(line), "header average_doclength %.9g differs from the doclengths' average %.9g",
                  header.average_doclength, avgdl);
    summary.notes.push_back(std::string(line) + "; BM25 uses the doclengths");
  }

  // 2. Ingest, in term order.
  file.Advise(MADV_NORMAL);
  SEARCH_ASSIGN_OR_RETURN(auto dir, BuildDir::Create(options.output, options.force, &summary.notes));
  IngestOptions io;
  io.shards = options.shards;
  io.bm25 = options.bm25;
  io.analyzer = options.analyzer;
  io.threads = options.threads;
  io.created_by = options.created_by;
  SEARCH_ASSIGN_OR_RETURN(auto ingest, PostingsIngest::Create(dir->path(), std::move(lengths), io));
  SEARCH_RETURN_IF_ERROR(ingest->AddListsParallel(lists.size(), [&](uint64_t i, TermPostings* out) {
    std::string_view term;
    uint64_t count = 0;
    SEARCH_RETURN_IF_ERROR(ParseCiffPostingsList(bytes, lists[i].body, num_docs, &term, &out->docs, &out->tfs, &count));
    out->term.assign(term);
    return Status::Ok();
  }));
  SEARCH_ASSIGN_OR_RETURN(IngestSummary done, ingest->Finish([&](uint32_t doc, std::string* id) {
    uint64_t p = record_at[doc];
    SEARCH_ASSIGN_OR_RETURN(CiffSpan body, ReadCiffDelimited(bytes, &p, "DocRecord"));
    SEARCH_ASSIGN_OR_RETURN(CiffDocRecord rec, ParseCiffDocRecord(bytes, body, num_docs));
    id->assign(rec.collection_docid);
    return Status::Ok();
  }));
  ingest.reset();
  if (done.postings != postings) return Status::Internal("CIFF postings changed between the two passes");
  SEARCH_RETURN_IF_ERROR(dir->Publish());
  summary.docs = num_docs;
  summary.terms = done.terms;
  summary.postings = done.postings;
  summary.total_tokens = total_tokens;
  summary.bytes = DirectoryBytes(dir->target());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace search
