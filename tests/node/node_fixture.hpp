// Test support for the shard node: a random one-shard index written with ShardWriter (Zipf
// vocabulary "w0".."wV", global stats = the shard's own), the reference answer from CpuExecutor
// plus ShardReader::GetExternalId, and a DEALER client speaking [empty][Envelope].
// Thread-safety: none needed (each object belongs to one test thread).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "codec/block_codec.hpp"
#include "codec/positions_codec.hpp"
#include "core/bm25.hpp"
#include "cpu_exec/cpu_executor.hpp"
#include "index_store/shard_store.hpp"
#include "proto/wire.hpp"
#include "../rocksdb_fault.hpp"
#include "../temp_dir.hpp"

namespace search::testing {

inline std::string Word(uint32_t i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "w%u", i);
  return buf;
}

// Writes a one-shard collection of `num_docs` documents at `path`.
// With `positions`, each term's positions too (the documents' token order: phrases occur).
inline Status WriteRandomShard(const std::string& path, uint32_t num_docs, uint32_t vocab, uint64_t seed,
                               bool positions = false) {
  std::mt19937_64 rng(seed);
  std::vector<double> cdf(vocab);
  double acc = 0;
  for (uint32_t i = 0; i < vocab; ++i) cdf[i] = acc += 1.0 / (i + 1.0);
  auto draw = [&] {
    const double u = std::uniform_real_distribution<double>(0, acc)(rng);
    return std::min<uint32_t>(vocab - 1, static_cast<uint32_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()));
  };
  std::vector<uint32_t> lengths(num_docs);
  std::map<std::string, std::vector<std::pair<uint32_t, uint32_t>>> postings;  // term -> (doc, tf)
  std::map<std::string, std::vector<uint32_t>> pos;  // term -> its positions, posting by posting
  uint64_t total = 0;
  for (uint32_t d = 0; d < num_docs; ++d) {
    const uint32_t len = 3 + static_cast<uint32_t>(rng() % 40);
    std::map<uint32_t, std::vector<uint32_t>> tf;
    for (uint32_t i = 0; i < len; ++i) tf[draw()].push_back(i);
    for (const auto& [t, ps] : tf) {
      postings[Word(t)].push_back({d, static_cast<uint32_t>(ps.size())});
      pos[Word(t)].insert(pos[Word(t)].end(), ps.begin(), ps.end());
    }
    lengths[d] = len;
    total += len;
  }
  ShardMeta meta;
  meta.shard_id = 0;
  meta.num_shards = 1;
  meta.doc_begin = 0;
  meta.doc_end = num_docs;
  meta.stats.num_docs = num_docs;
  meta.stats.total_tokens = total;
  meta.positions = positions;
  auto writer = ShardWriter::Create(path, meta);
  if (!writer.ok()) return writer.status();
  const double avgdl = meta.stats.avgdl();
  for (const auto& [term, list] : postings) {  // std::map: ascending bytewise for ASCII
    std::vector<uint32_t> docs, tfs;
    uint64_t cf = 0;
    for (const auto& [d, f] : list) {
      docs.push_back(d);
      tfs.push_back(f);
      cf += f;
    }
    const float idf = Bm25Idf(num_docs, docs.size());
    auto blob = EncodeList(docs, tfs, 0, [&](uint32_t doc, uint32_t f) {
      return Bm25TermScore(idf, f, Bm25Norm(lengths[doc], avgdl, meta.bm25), meta.bm25.k1);
    });
    if (!blob.ok()) return blob.status();
    auto view = ListView::Parse(*blob);
    if (!view.ok()) return view.status();
    TermInfo info;
    info.df = static_cast<uint32_t>(docs.size());
    info.count = info.df;
    info.cf = cf;
    info.max_score = view->max_score();
    info.list_bytes = static_cast<uint32_t>(blob->size());
    std::string pos_blob;
    if (positions) {
      auto p = EncodePositions(tfs, pos[term]);
      if (!p.ok()) return p.status();
      pos_blob = std::move(*p);
    }
    SEARCH_RETURN_IF_ERROR((*writer)->AddTerm(term, info, *blob, pos_blob));
  }
  for (uint32_t d = 0; d < num_docs; ++d) {
    SEARCH_RETURN_IF_ERROR((*writer)->AddDoc(d, "ext-" + std::to_string(d), lengths[d]));
  }
  return (*writer)->Finish();
}

// A canonical random query over the vocabulary (sometimes with a term absent from the index).
inline SearchRequestMsg RandomRequest(std::mt19937_64& rng, uint32_t vocab, uint64_t id) {
  SearchRequestMsg r;
  r.request_id = id;
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) r.terms.push_back(Word(static_cast<uint32_t>(rng() % (rng() % 4 == 0 ? vocab : 30))));
  if (rng() % 20 == 0) r.terms.push_back("absent");
  std::sort(r.terms.begin(), r.terms.end());
  r.terms.erase(std::unique(r.terms.begin(), r.terms.end()), r.terms.end());
  r.mode = static_cast<QueryMode>(rng() % 3);
  r.k = 1 + static_cast<uint32_t>(rng() % 50);
  return r;
}

// A random canonical query tree over the vocabulary's hot words: 1..4 clauses of terms, groups
// (one level), phrases when `phrases`, every occurrence; mode, k (0 with count, at times) and count
// random. terms = the tree's tokens, as the integrator sends them.
inline QueryNode RandomTreeNode(std::mt19937_64& rng, bool phrases, int depth) {
  auto word = [&] { return Word(static_cast<uint32_t>(rng() % 30)); };
  QueryNode n;
  const uint64_t kind = rng() % 10;
  if (kind < 6 || depth == 0) {
    n.kind = QueryNode::Kind::kTerm;
    n.tokens = {word()};
  } else if (kind < 8 && phrases) {
    n.kind = QueryNode::Kind::kPhrase;
    n.tokens = {word(), word()};
  } else {
    n.kind = QueryNode::Kind::kBool;
    for (uint64_t i = 1 + rng() % 3; i > 0; --i)
      n.clauses.push_back({static_cast<Occur>(rng() % 5), RandomTreeNode(rng, phrases, depth - 1)});
  }
  return n;
}

inline SearchRequestMsg RandomTreeRequest(std::mt19937_64& rng, uint64_t id, bool phrases) {
  QueryNode root;
  for (uint64_t i = 1 + rng() % 4; i > 0; --i)
    root.clauses.push_back({static_cast<Occur>(rng() % 5), RandomTreeNode(rng, phrases, 1)});
  SearchRequestMsg r;
  r.request_id = id;
  r.tree = std::make_shared<const QueryNode>(Canonicalize(std::move(root)));
  r.terms = TreeTerms(*r.tree);
  r.mode = static_cast<QueryMode>(rng() % 3);
  r.count = rng() % 2 == 0;
  r.k = r.count && rng() % 4 == 0 ? 0 : 1 + static_cast<uint32_t>(rng() % 50);
  return r;
}

// An or-query of `slots` distinct two-word phrases as should clauses (k 10): past the GPU
// program's slots when slots > kGpuTreeSlots, so the CPU engine's.
inline Query WidePhraseQuery(size_t slots) {
  QueryNode wide;
  for (uint32_t a = 0; wide.clauses.size() < slots; ++a) {
    QueryNode ph;
    ph.kind = QueryNode::Kind::kPhrase;
    ph.tokens = {Word(a % 6), Word(1 + a / 6)};
    wide.clauses.push_back({Occur::kShould, ph});
  }
  Query q;
  q.tree = std::make_shared<const QueryNode>(Canonicalize(std::move(wide)));
  q.terms = TreeTerms(*q.tree);
  q.mode = QueryMode::kOr;
  q.k = 10;
  return q;
}

// What the node must answer: CpuExecutor's hits with external ids.
inline std::vector<HitMsg> Reference(const ShardReader& shard, const SearchRequestMsg& r) {
  CpuExecutor exec(&shard);
  auto res = exec.Search(ToQuery(r));
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  std::vector<HitMsg> out;
  if (!res.ok()) return out;
  for (const ScoredDoc& d : res->hits) out.push_back(HitMsg{d.doc, d.score, *shard.GetExternalId(d.doc)});
  return out;
}

// A DEALER speaking to a node.
class Client {
 public:
  Client(zmq::context_t& ctx, const std::string& endpoint) : s_(ctx, zmq::socket_type::dealer) {
    s_.set(zmq::sockopt::linger, 0);
    s_.connect(endpoint);
  }
  void SendFrames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      s_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  void Send(const std::string& payload) { SendFrames({"", payload}); }
  // The next reply within `timeout_ms`, decoded; nullopt on timeout.
  std::optional<EnvelopeMsg> Recv(int timeout_ms = 5000) {
    zmq::pollitem_t item{s_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return std::nullopt;
    std::vector<zmq::message_t> parts;
    for (bool more = true; more;) {
      zmq::message_t m;
      if (!s_.recv(m)) return std::nullopt;
      more = m.more();
      parts.push_back(std::move(m));
    }
    // A reply takes its request's shape: [empty][message], or [message] alone.
    last_frames = parts.size();
    EXPECT_LE(parts.size(), 2u);
    if (parts.size() == 2) {
      EXPECT_EQ(parts.front().size(), 0u);
    }
    auto env = DecodeEnvelope(parts.back().to_string_view());
    EXPECT_TRUE(env.ok()) << env.status().ToString();
    if (!env.ok()) return std::nullopt;
    return std::move(env).value();
  }
  size_t last_frames = 0;  // the frames of the last reply Recv took
  SearchResponseMsg RecvResponse(int timeout_ms = 5000) {
    auto env = Recv(timeout_ms);
    EXPECT_TRUE(env.has_value()) << "no reply";
    if (!env || env->kind() != MessageKind::kSearchResponse) {
      SearchResponseMsg bad;
      bad.status = Status::Internal("no search response");
      return bad;
    }
    return std::get<SearchResponseMsg>(env->body);
  }

 private:
  zmq::socket_t s_;
};

// A canonical random query: 1..8 terms (Zipf-hot and rare ones, sometimes absent), any mode,
// k from 1 to 1000.
inline Query RandomQuery(std::mt19937_64& rng, uint32_t vocab) {
  Query q;
  const int n = 1 + static_cast<int>(rng() % (rng() % 5 == 0 ? 8 : 4));
  for (int i = 0; i < n; ++i) {
    q.terms.push_back(testing::Word(static_cast<uint32_t>(rng() % (rng() % 3 == 0 ? vocab : 40))));
  }
  if (rng() % 25 == 0) q.terms.push_back("absent");
  std::sort(q.terms.begin(), q.terms.end());
  q.terms.erase(std::unique(q.terms.begin(), q.terms.end()), q.terms.end());
  q.mode = static_cast<QueryMode>(rng() % 3);
  const uint32_t r = static_cast<uint32_t>(rng() % 10);
  q.k = r == 0 ? 1 : r < 7 ? 1 + static_cast<uint32_t>(rng() % 50) : 1 + static_cast<uint32_t>(rng() % 1000);
  return q;
}

inline std::string Describe(const Query& q) {
  std::ostringstream os;
  os << QueryModeName(q.mode) << " k=" << q.k << " [";
  for (const auto& t : q.terms) os << " " << t;
  os << " ]";
  return os.str();
}

// Compares two answers hit by hit; the first difference is reported with both sides.
inline ::testing::AssertionResult SameHits(const std::vector<HitMsg>& got, const std::vector<HitMsg>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (!(got[i] == want[i])) {
      return ::testing::AssertionFailure()
             << "hit " << i << ": got doc " << got[i].doc << " score " << got[i].score << " ('" << got[i].external_id
             << "'), want doc " << want[i].doc << " score " << want[i].score << " ('" << want[i].external_id << "')";
    }
  }
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "got " << got.size() << " hits, want " << want.size();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace search::testing
