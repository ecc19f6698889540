// PostingsIngest (postings_ingest.hpp): cut each list at the shard ranges, encode the parts with
// BM25 block maxima from the global statistics, write them in term order; then the documents,
// the shards' Finish, checksums and the manifest.
#include "index_store/postings_ingest.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "codec/block_codec.hpp"
#include "core/parallel_for.hpp"
#include "index_store/shard_store.hpp"
#include "shard_format.hpp"

namespace search {

namespace fs = std::filesystem;

namespace {

// One shard's part of an encoded term.
struct EncodedPart {
  uint32_t shard = 0;
  TermInfo info;
  std::string bytes;
};

struct EncodedTerm {
  std::string term;
  std::vector<EncodedPart> parts;
  uint64_t postings = 0;
};

uint32_t HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

using store::QuoteTerm;  // one quoting rule for every index_store error message

}  // namespace

struct PostingsIngest::Impl {
  std::string dir;
  IngestOptions options;
  uint32_t threads = 1;
  std::vector<uint32_t> lengths;
  std::vector<float> norms;
  CollectionStats stats;
  std::vector<uint32_t> begin, end;  // shard ranges
  std::vector<std::unique_ptr<ShardWriter>> writers;
  std::vector<ShardEntry> entries;
  std::string last_term;
  bool have_term = false;
  bool broken = false;  // a parallel run failed part-way: shards may hold part of a term
  bool finished = false;
  uint64_t terms = 0, postings = 0, list_bytes = 0;

  uint32_t ShardOf(uint32_t doc) const {
    return static_cast<uint32_t>(std::upper_bound(end.begin(), end.end(), doc) - end.begin());
  }

  Status Usable() const {
    if (finished) return Status::InvalidArgument("the ingest of " + dir + " is already finished");
    if (broken) return Status::InvalidArgument("the ingest of " + dir + " failed earlier and cannot continue");
    return Status::Ok();
  }

  // Cuts the list at the shard boundaries and encodes every part. Thread-safe (reads only).
  Status Encode(std::string_view term, std::span<const uint32_t> docs, std::span<const uint32_t> tfs,
                EncodedTerm* out) const {
    out->term.assign(term);
    out->parts.clear();
    out->postings = docs.size();
    if (term.empty()) return Status::InvalidArgument("empty term");
    if (docs.empty()) return Status::InvalidArgument("term " + QuoteTerm(term) + " has no postings");
    if (docs.size() != tfs.size())
      return Status::InvalidArgument("term " + QuoteTerm(term) + ": " + std::to_string(docs.size()) + " docIDs but " +
                                     std::to_string(tfs.size()) + " tfs");
    const uint64_t n = stats.num_docs;
    if (docs.size() > n)
      return Status::InvalidArgument("term " + QuoteTerm(term) + " has more postings than the " + std::to_string(n) +
                                     " documents");
    const float idf = Bm25Idf(n, docs.size());
    const float k1 = options.bm25.k1;
    const float* nm = norms.data();
    const PostingScorer scorer = [idf, k1, nm](uint32_t doc, uint32_t tf) { return Bm25TermScore(idf, tf, nm[doc], k1); };
    size_t i = 0;
    while (i < docs.size()) {
      const uint32_t s = ShardOf(docs[i]);
      if (s >= end.size())
        return Status::InvalidArgument("term " + QuoteTerm(term) + ": docID " + std::to_string(docs[i]) +
                                       " is not below the number of documents " + std::to_string(n));
      size_t j = i;
      uint64_t cf = 0;
      while (j < docs.size() && docs[j] < end[s]) cf += tfs[j++];
      // EncodeList checks that the part ascends strictly and that every tf >= 1; a descent can
      // only hide inside a part (a part ends at the first docID past its shard).
      auto bytes = EncodeList(docs.subspan(i, j - i), tfs.subspan(i, j - i), begin[s], scorer);
      if (!bytes.ok()) return Status::InvalidArgument("term " + QuoteTerm(term) + ": " + bytes.status().message());
      EncodedPart& part = out->parts.emplace_back();
      part.shard = s;
      part.bytes = std::move(bytes).value();
      ListHeader header;
      std::memcpy(&header, part.bytes.data(), sizeof(header));
      part.info.df = static_cast<uint32_t>(docs.size());
      part.info.count = static_cast<uint32_t>(j - i);
      part.info.cf = cf;
      part.info.max_score = header.max_score;
      part.info.list_bytes = static_cast<uint32_t>(part.bytes.size());
      i = j;
    }
    return Status::Ok();
  }

  // Writes an encoded term. REQUIRES: called in term order, one thread at a time.
  Status Deliver(EncodedTerm* t) {
    if (have_term && std::string_view(t->term) <= std::string_view(last_term))
      return Status::InvalidArgument("term " + QuoteTerm(t->term) + " is not after " + QuoteTerm(last_term) +
                                     ": terms must be strictly ascending");
    for (size_t p = 0; p < t->parts.size(); ++p) {
      EncodedPart& part = t->parts[p];
      Status s = writers[part.shard]->AddTerm(t->term, part.info, part.bytes);
      if (!s.ok()) {
        if (p > 0) broken = true;  // earlier shards already hold the term
        return s.WithContext("shard " + std::to_string(part.shard));
      }
      ++entries[part.shard].num_terms;
      entries[part.shard].num_postings += part.info.count;
      list_bytes += part.bytes.size();
      std::string().swap(part.bytes);
    }
    last_term = t->term;
    have_term = true;
    ++terms;
    postings += t->postings;
    return Status::Ok();
  }
};

PostingsIngest::PostingsIngest(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PostingsIngest::~PostingsIngest() = default;

const CollectionStats& PostingsIngest::stats() const { return impl_->stats; }
const std::vector<uint32_t>& PostingsIngest::lengths() const { return impl_->lengths; }

Result<std::unique_ptr<PostingsIngest>> PostingsIngest::Create(const std::string& dir, std::vector<uint32_t> lengths,
                                                               const IngestOptions& options) {
  const uint64_t n = lengths.size();
  if (n == 0) return Status::InvalidArgument("an index needs at least one document");
  if (n >= (uint64_t{1} << 32) - 1) return Status::InvalidArgument("at most 2^32 - 2 documents");
  if (options.shards == 0) return Status::InvalidArgument("the number of shards must be at least 1");
  if (options.shards > n)
    return Status::InvalidArgument(std::to_string(options.shards) + " shards for " + std::to_string(n) +
                                   " documents: every shard needs at least one document");
  if (!(options.bm25.k1 >= 0 && options.bm25.k1 <= 1e6f) || !(options.bm25.b >= 0 && options.bm25.b <= 1))
    return Status::InvalidArgument("bm25 parameters out of range (k1 in [0, 1e6], b in [0, 1])");
  SEARCH_RETURN_IF_ERROR(Analyzer::Create(options.analyzer).status());
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec))
      return Status::AlreadyExists(dir + " exists and is not an empty directory");
  } else if (!fs::create_directory(dir, ec) || ec) {
    return Status::IOError("create " + dir + ": " + (ec ? ec.message() : "failed"));
  }

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->options = options;
  impl->threads = options.threads != 0 ? options.threads : HardwareThreads();
  uint64_t total = 0;
  for (uint32_t len : lengths) total += len;
  impl->stats = CollectionStats{n, total};
  impl->lengths = std::move(lengths);
  impl->norms.resize(n);
  const double avgdl = impl->stats.avgdl();
  for (uint64_t d = 0; d < n; ++d) impl->norms[d] = Bm25Norm(impl->lengths[d], avgdl, options.bm25);

  for (uint32_t i = 0; i < options.shards; ++i) {
    uint32_t b, e;
    ShardRange(n, options.shards, i, &b, &e);
    impl->begin.push_back(b);
    impl->end.push_back(e);
    ShardMeta meta;
    meta.shard_id = i;
    meta.num_shards = options.shards;
    meta.doc_begin = b;
    meta.doc_end = e;
    meta.stats = impl->stats;
    meta.bm25 = options.bm25;
    meta.analyzer = options.analyzer;
    ShardEntry entry;
    entry.id = i;
    entry.path = "shard-" + std::to_string(i);
    entry.doc_begin = b;
    entry.doc_end = e;
    SEARCH_ASSIGN_OR_RETURN(auto w, ShardWriter::Create(dir + "/" + entry.path, meta));
    impl->writers.push_back(std::move(w));
    impl->entries.push_back(std::move(entry));
  }
  return std::unique_ptr<PostingsIngest>(new PostingsIngest(std::move(impl)));
}

Status PostingsIngest::AddList(std::string_view term, std::span<const uint32_t> docs, std::span<const uint32_t> tfs) {
  Impl& m = *impl_;
  SEARCH_RETURN_IF_ERROR(m.Usable());
  EncodedTerm encoded;
  SEARCH_RETURN_IF_ERROR(m.Encode(term, docs, tfs, &encoded));
  return m.Deliver(&encoded);
}

Status PostingsIngest::AddListsParallel(uint64_t count, const Producer& produce) {
  Impl& m = *impl_;
  SEARCH_RETURN_IF_ERROR(m.Usable());
  if (count == 0) return Status::Ok();
  const uint32_t threads = static_cast<uint32_t>(std::min<uint64_t>(m.threads, count));
  const size_t window = std::max<size_t>(
      std::min<uint64_t>(m.options.window != 0 ? m.options.window : size_t{1} << 20, count), threads);
  const uint64_t budget = std::max<uint64_t>(m.options.max_inflight_bytes, 1);

  // Term i goes to slot i % window once i < next_deliver + window. Whoever holds the delivery
  // token writes the ready slots in order; a thread that fills a slot tries to take the token,
  // and the holder re-checks after letting it go, so a ready slot is never left behind. A thread
  // ahead of the window, or finding more than `budget` encoded bytes waiting, blocks (on a
  // condition variable, notified only when someone waits) unless its term is the next to write,
  // which therefore always progresses. A long list thus stalls the writer, not the producers.
  struct Slot {
    std::atomic<bool> ready{false};
    bool skip = false;
    EncodedTerm term;
  };
  constexpr uint64_t kStopped = UINT64_MAX / 2;
  std::vector<Slot> slots(window);
  std::atomic<uint64_t> next_take{0}, next_deliver{0};
  std::atomic<bool> delivering{false}, failed{false};
  std::atomic<int> waiters{0};
  std::atomic<uint64_t> inflight{0};  // encoded bytes produced, not yet written
  std::mutex mu;  // for the condition variable and `error`
  std::condition_variable cv;
  Status error;  // GUARDED_BY(mu)

  auto wake = [&] {
    if (waiters.load() == 0) return;
    { std::lock_guard lk(mu); }
    cv.notify_all();
  };
  auto fail = [&](Status s) {
    {
      std::lock_guard lk(mu);
      if (error.ok()) error = std::move(s);
    }
    failed.store(true);
    next_deliver.store(kStopped);
    cv.notify_all();
  };
  auto try_deliver = [&] {
    for (;;) {
      if (delivering.exchange(true)) return;
      uint64_t nd = next_deliver.load();
      while (!failed.load() && nd < kStopped && slots[nd % window].ready.load()) {
        Slot& head = slots[nd % window];
        Status d;
        uint64_t bytes = 0;
        if (!head.skip) {
          for (const auto& part : head.term.parts) bytes += part.bytes.size();
          d = m.Deliver(&head.term);
        }
        if (!d.ok()) {
          fail(d);
          break;
        }
        head.ready.store(false);
        inflight.fetch_sub(bytes);
        next_deliver.store(++nd);
        if ((nd & 255) == 0) wake();
      }
      // Wake-ups every 256 terms and after a run of deliveries, not per term: waking every waiter
      // for each of millions of small terms had the threads spend as much time in futex calls
      // (system time) as in producing.
      wake();
      delivering.store(false);
      if (failed.load() || nd >= kStopped || !slots[nd % window].ready.load()) return;
    }
  };
  auto worker = [&] {
    TermPostings tp;
    EncodedTerm encoded;
    for (;;) {
      const uint64_t i = next_take.fetch_add(1, std::memory_order_relaxed);
      if (i >= count || failed.load()) return;
      auto may_go = [&] {
        const uint64_t nd = next_deliver.load();
        return failed.load() || i == nd || (i < nd + window && inflight.load() < budget);
      };
      if (!may_go()) {
        std::unique_lock lk(mu);
        waiters.fetch_add(1);
        cv.wait(lk, may_go);
        waiters.fetch_sub(1);
      }
      if (failed.load()) return;
      tp.term.clear();
      tp.docs.clear();
      tp.tfs.clear();
      tp.skip = false;
      Status s = produce(i, &tp);
      if (s.ok() && !tp.skip) s = m.Encode(tp.term, tp.docs, tp.tfs, &encoded);
      if (!s.ok()) {
        fail(s.WithContext("term #" + std::to_string(i)));
        return;
      }
      if (!tp.skip) {
        uint64_t bytes = 0;
        for (const auto& part : encoded.parts) bytes += part.bytes.size();
        inflight.fetch_add(bytes);
      }
      Slot& slot = slots[i % window];
      slot.skip = tp.skip;
      if (!tp.skip) std::swap(slot.term, encoded);  // the slot's old buffers come back for reuse
      slot.ready.store(true);
      try_deliver();
    }
  };
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (failed.load()) {
    m.broken = true;
    std::lock_guard lk(mu);
    return error;
  }
  if (next_deliver.load() != count) {
    m.broken = true;
    return Status::Internal("parallel ingest delivered " + std::to_string(next_deliver.load()) + " of " +
                            std::to_string(count) + " terms");
  }
  return Status::Ok();
}

Result<IngestSummary> PostingsIngest::Finish(const IdFn& id_of) {
  Impl& m = *impl_;
  SEARCH_RETURN_IF_ERROR(m.Usable());
  m.finished = true;
  const size_t shards = m.writers.size();
  std::vector<Status> done(shards);
  ParallelFor(shards, m.threads, [&](size_t s) {
    std::string id;
    for (uint32_t d = m.begin[s]; d < m.end[s]; ++d) {
      id.clear();
      Status st = id_of(d, &id);
      if (st.ok()) st = m.writers[s]->AddDoc(d, id, m.lengths[d]);
      if (!st.ok()) {
        done[s] = st.WithContext("document " + std::to_string(d));
        return;
      }
    }
    done[s] = m.writers[s]->Finish();
    if (!done[s].ok()) return;
    m.writers[s].reset();
    auto sum = ComputeShardChecksum(m.dir + "/" + m.entries[s].path);
    if (sum.ok()) {
      m.entries[s].checksum = *sum;
    } else {
      done[s] = sum.status();
    }
  });
  for (auto& s : done) SEARCH_RETURN_IF_ERROR(s);

  IngestSummary summary;
  Manifest& manifest = summary.manifest;
  manifest.format_version = kIndexFormatVersion;
  manifest.stats = m.stats;
  manifest.bm25 = m.options.bm25;
  manifest.analyzer = m.options.analyzer;
  manifest.shards = m.entries;
  manifest.created_by = m.options.created_by;
  SEARCH_RETURN_IF_ERROR(manifest.Write(m.dir));
  summary.terms = m.terms;
  summary.postings = m.postings;
  summary.list_bytes = m.list_bytes;
  return summary;
}

}  // namespace search
