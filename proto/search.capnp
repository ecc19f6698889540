# The wire contract between the query integrator and the shard nodes: the ONLY thing they share.
# Transport: ZeroMQ. The integrator holds a DEALER socket per node; a node has a ROUTER front.
# Each ZeroMQ message is [empty delimiter frame][one Cap'n Proto message, unpacked, flat segments
# as written by capnp::messageToFlatArray]. Every message is an Envelope.
#
# Versioning: Envelope.major/minor. A receiver rejects an unknown MAJOR version with an
# ErrorInfo{code = invalidArgument, message = "unsupported protocol major version X (this node
# speaks Y)"} in a SearchResponse (or Pong) addressed to the same request id; minor versions are
# additive (new fields at the end of structs, new union members) and always accepted.
# A request with a tree or a count needs a node of minor version 1 or later: a 1.0 node would
# ignore both and answer the bag of words, so the integrator fails a shard whose reply to such a
# request comes in an envelope of minor 0 (it names the version) instead of merging a wrong answer.
# Minor 2 adds the fetch phase (query-then-fetch, as Elasticsearch's): after merging the shards' top-k
# the integrator sends a FetchRequest to each shard that owns some of the final hits only, under the
# same deadline, and the node answers a FetchResponse with each document's stored source and
# highlight fragments. A node of minor 1 or older cannot read a FetchRequest (an unknown union
# member) and would drop it, so the integrator sends none to a node whose pongs and replies come in
# older envelopes: its hits come back without source ("fetch failed", naming the version), as for
# any shard that fails at fetch.
# Limits: receivers parse with capnp::ReaderOptions{traversalLimitInWords = 8 Mi words,
# nestingLimit = 16}; a message that fails to parse is answered with an error when a request id can
# be recovered and dropped (and counted) otherwise. Frames are copied into word-aligned buffers
# before parsing.
@0xad94d701fdefbf14;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("search::wire");

const protocolMajor :UInt16 = 1;
const protocolMinor :UInt16 = 3;  # 1: query trees, counts and totals (SearchRequest.tree/count,
                                  # SearchResponse.total/hasTotal/orTotal)
                                  # 2: the fetch phase (FetchRequest, FetchResponse)
                                  # 3: nodes take [Envelope] as well as [empty][Envelope] (the
                                  #    ZeroMQ frames after the DEALER's identity) and answer in
                                  #    the request's shape

enum Mode {
  and @0;    # every term
  or @1;     # any term
  andOr @2;  # AND; if fewer than k hits, OR (Ding 2009 §8)
}

enum StatusCode {
  ok @0;
  invalidArgument @1;
  notFound @2;
  corruption @3;
  ioError @4;
  unavailable @5;
  deadlineExceeded @6;
  resourceExhausted @7;
  internal @8;
}

enum Processor {
  cpu @0;
  gpu @1;
  hybrid @2;   # parts of the query ran on each (intra-query migration)
}

struct ErrorInfo {
  code @0 :StatusCode;
  message @1 :Text;
}

enum Occur {
  default @0;  # a bare clause: must under mode and, should under mode or
  must @1;     # '+'
  should @2;
  mustNot @3;  # '-'
  filter @4;   # must match, adds nothing to the score
}

enum NodeKind {
  term @0;     # one token
  phrase @1;   # two or more tokens, in text order
  boolean @2;  # a boolean of `clauses` clauses
}

# One node of a query tree (core/query_tree.hpp), in a flat pre-order list: a boolean is followed
# by its clauses, each a whole subtree in pre-order, so the list needs no nesting (the reader's
# nestingLimit stays out of the way of deep trees). The first node is the root: a boolean whose
# occur is default.
struct QueryNode {
  kind @0 :NodeKind;
  occur @1 :Occur;             # the occurrence of the clause this node is (root: default)
  tokens @2 :List(Text);       # term: one token; phrase: 2..64; bool: none
  clauses @3 :UInt32;          # bool: how many clauses follow; term and phrase: 0
}

struct SearchRequest {
  requestId @0 :UInt64;        # chosen by the integrator; echoed in the response
  terms @1 :List(Text);        # analyzed at the integrator: unique, sorted ascending (canonical order)
  mode @2 :Mode;
  k @3 :UInt32;                # 1..10000; 0..10000 with count
  deadlineUnixMicros @4 :Int64;# absolute wall-clock deadline; 0 = none. A node answers
                               # deadlineExceeded without running a request already past it.
  flags @5 :UInt32;            # bit 0: include execution stats; bit 1: force CPU; bit 2: force GPU;
                               # bit 3: andor split (with mode and: answer the AND hits, and when
                               # this shard has fewer than k of them also its OR top-k in orHits, so
                               # the integrator decides andor on the merged AND hits in one round
                               # trip; a node that ignores the bit answers AND alone)
  tree @6 :List(QueryNode);    # minor 1: the query's canonical tree (core/query_tree.hpp), pre-order;
                               # empty: the bag of words `terms` under `mode`. With a tree, `terms`
                               # lists its distinct tokens (TreeTerms). The receiver checks it:
                               # ValidateTree's limits (depth 8, 1024 clauses, phrases of 2..64
                               # tokens), canonical form, terms equal to its tokens.
  count @7 :Bool;              # minor 1: also count the matching documents exactly (SearchResponse.total);
                               # with count, k may be 0 (the count only)
}

struct Hit {
  doc @0 :UInt32;              # global docID
  score @1 :Float32;           # BM25, summed in canonical term order
  externalId @2 :Text;
}

struct ExecStats {
  processor @0 :Processor;
  blocksDecoded @1 :UInt64;
  postingsDecoded @2 :UInt64;
  postingsScored @3 :UInt64;
  queueMicros @4 :UInt64;      # time waiting for a worker
  runMicros @5 :UInt64;        # time executing
}

struct SearchResponse {
  requestId @0 :UInt64;
  shardId @1 :UInt32;
  status @2 :ErrorInfo;        # code = ok on success; otherwise hits is empty
  hits @3 :List(Hit);          # best first (score desc, docID asc), at most k
  stats @4 :ExecStats;
  docBegin @5 :UInt32;         # the shard's docID range, for coverage reporting
  docEnd @6 :UInt32;
  orHits @7 :List(Hit);        # andor split: the OR top-k (when hasOrHits)
  hasOrHits @8 :Bool;          # andor split: this shard had fewer than k AND hits
  total @9 :UInt64;            # minor 1, when hasTotal: the documents of this shard that match
  hasTotal @10 :Bool;          # the request asked for a count (and the status is ok)
  orTotal @11 :UInt64;         # andor split, with hasTotal and hasOrHits: the OR query's total
}

struct Ping {
  requestId @0 :UInt64;
}

struct ShardHealth {
  shardId @0 :UInt32;
  numShards @1 :UInt32;
  docBegin @2 :UInt32;
  docEnd @3 :UInt32;
  numDocsGlobal @4 :UInt64;
  state @5 :Text;              # "serving", "draining", "degraded: <reason>"
  inFlight @6 :UInt32;
  queued @7 :UInt32;
  gpu @8 :Bool;                # a GPU executor is active
  analyzerJson @9 :Text;       # the analyzer recorded in the index (AnalyzerConfig::ToJson)
  indexFormatVersion @10 :UInt32;
  hasSources @11 :Bool;        # minor 2: the shard stores its documents' sources; the integrator
                               # sends no fetch for sources alone to a shard without them
}

struct Pong {
  requestId @0 :UInt64;
  health @1 :ShardHealth;
  status @2 :ErrorInfo;
}

# Minor 2. What to highlight: the analyzed query terms and phrases (core/highlight.hpp
# HighlightTerms, computed once at the integrator from the query's canonical tree: every term and
# phrase not under a mustNot clause). The node marks them in each document's "contents" string.
struct HighlightPhrase {
  tokens @0 :List(Text);       # 2..64 analyzed tokens, in text order
}

# Minor 2: the fetch phase. The integrator asks one shard for the documents of the final top-k that
# it owns, after the merge, under the search's deadline.
struct FetchRequest {
  requestId @0 :UInt64;        # chosen by the integrator; echoed in the response
  deadlineUnixMicros @1 :Int64;# absolute wall-clock deadline; 0 = none (as SearchRequest's)
  docs @2 :List(UInt32);       # global docIDs of this shard, 1..10000 of them, any order, repeats allowed
  source @3 :Bool;             # send each document's stored source
  highlight @4 :Bool;          # send highlight fragments of each document's "contents"
  highlightTerms @5 :List(Text);              # with highlight: the analyzed terms to mark (<= 1024,
  highlightPhrases @6 :List(HighlightPhrase); # each 1..1024 bytes) and phrases (<= 1024)
}

struct FetchedDoc {
  doc @0 :UInt32;              # the global docID asked for
  source @1 :Data;             # with FetchRequest.source and hasSource: the JSON object byte for byte
                               # as it was indexed (Data: no re-encoding, any bytes)
  hasSource @2 :Bool;          # false: the shard stores no sources (an index built with --no-source,
                               # import-ciff, generate): "not stored", not an error
  highlights @3 :List(Text);   # with FetchRequest.highlight: up to 3 fragments of the source's
                               # "contents" string, best first, HTML-escaped with each match in
                               # <em>...</em> (core/highlight.hpp); none without a match, without a
                               # source or without a string "contents"
  omitted @4 :Bool;            # source and fragments left out: with them the answer would pass the
                               # frame limit (16 MiB; a source may be larger, and k of them more).
                               # Documents are kept in request order (the integrator's: best first)
                               # while they fit; not an error
}

struct FetchResponse {
  requestId @0 :UInt64;
  shardId @1 :UInt32;
  status @2 :ErrorInfo;        # ok, or the error (then docs is empty): corruption when a stored source
                               # block fails its checks (never wrong text), invalidArgument for a doc
                               # outside the shard, deadlineExceeded, resourceExhausted when the answer
                               # would pass the frame limit (16 MiB)
  docs @3 :List(FetchedDoc);   # one per FetchRequest.docs, in its order
}

struct Envelope {
  major @0 :UInt16;
  minor @1 :UInt16;
  body :union {
    searchRequest @2 :SearchRequest;
    searchResponse @3 :SearchResponse;
    ping @4 :Ping;
    pong @5 :Pong;
    fetchRequest @6 :FetchRequest;    # minor 2
    fetchResponse @7 :FetchResponse;  # minor 2
  }
}
