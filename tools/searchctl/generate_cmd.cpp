// searchctl generate: a synthetic GOV2-like collection written directly as an index
// (scale/generate_index.hpp, scale/synthetic_corpus.hpp).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "common.hpp"
#include "scale/generate_index.hpp"
#include "scale_args.hpp"

namespace search::cli {

CLI::App* AddGenerateCommand(CLI::App& app, GenerateArgs* a) {
  CLI::App* cmd = app.add_subcommand("generate", "Write a synthetic GOV2-like collection directly as an index");
  cmd->footer(
      "Terms t1, t2, ... (t<rank>); term r has df(r) = round(N/2 * (218 / (r + 217))^1.5), a Zipf-Mandelbrot\n"
      "law calibrated on TREC GOV2: the longest lists hold N/2 documents and the total is ~218 postings per\n"
      "document (5.48e9 at N = 25.2M, in GOV2's 5 to 6 billion); ranks with df < 1 are not generated, so\n"
      "the vocabulary is 218 * N^(2/3) - 217 terms (18.7M at 25.2M). tf = 1 + geometric (mean rising with\n"
      "df) with a 1/128 chance of a heavy-tailed draw (up to 4096); a document's length is the sum of its\n"
      "tfs. Models place docIDs: zipf (default) gives documents sizes spread over two orders of magnitude\n"
      "(doc d attracts postings with weight 2^(d mod 8)); uniform and clustered are Anh & Moffat's models\n"
      "(Mallia et al. 2019 section 4). External ids are doc<d>. Deterministic per --seed, --model and --docs,\n"
      "whatever --threads. Built in OUT.tmp-<pid> and renamed into place when complete.\n"
      "Details: tools/searchctl/scale/README.md.");
  cmd->add_option("--docs", a->docs, "number of documents N")->required();
  cmd->add_option("--out", a->out, "index directory to create")->required();
  cmd->add_option("--shards", a->shards, "number of document-partitioned shards")->capture_default_str();
  cmd->add_option("--model", a->model, "docID placement: zipf | uniform | clustered")->capture_default_str();
  cmd->add_option("--seed", a->seed, "random seed")->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads (0 = all hardware threads)")->capture_default_str();
  cmd->add_flag("--force", a->force, "replace an existing index at --out");
  cmd->add_flag("--quiet", a->quiet, "no progress line, even on a terminal");
  return cmd;
}

int RunGenerate(const GenerateArgs& a) {
  auto model = ParseSyntheticModel(a.model);
  if (!model.ok()) return ReportError("generate", model.status(), kExitUsage);
  if (a.docs == 0 || a.docs > (uint64_t{1} << 31))
    return ReportError("generate", Status::InvalidArgument("--docs must be in [1, 2^31]"), kExitUsage);
  if (a.shards == 0 || a.shards > a.docs)
    return ReportError("generate", Status::InvalidArgument("--shards must be in [1, --docs]"), kExitUsage);
  if (a.threads > 4096) return ReportError("generate", Status::InvalidArgument("--threads must be <= 4096"), kExitUsage);
  GenerateOptions o;
  o.corpus.docs = a.docs;
  o.corpus.model = *model;
  o.corpus.seed = a.seed;
  o.output = a.out;
  o.shards = a.shards;
  o.threads = a.threads;
  o.force = a.force;
  o.progress = !a.quiet && ::isatty(STDERR_FILENO) != 0;
  o.created_by = "searchctl " SEARCH_VERSION " generate";
  auto summary = GenerateIndex(o);
  if (!summary.ok()) return ReportError("generate", summary.status(), kExitFailure);
  for (const auto& note : summary->notes) std::cerr << "searchctl generate: note: " << note << "\n";
  const auto& s = *summary;
  std::fprintf(stderr,
               "searchctl generate: docs=%llu terms=%llu postings=%llu tokens=%llu avgdl=%.1f bytes=%llu "
               "seconds=%.2f (lengths %.2f, lists %.2f, docs+finish %.2f) threads=%u model=%s seed=%llu -> %s\n",
               static_cast<unsigned long long>(s.docs), static_cast<unsigned long long>(s.terms),
               static_cast<unsigned long long>(s.postings), static_cast<unsigned long long>(s.total_tokens),
               s.docs == 0 ? 0.0 : static_cast<double>(s.total_tokens) / static_cast<double>(s.docs),
               static_cast<unsigned long long>(s.bytes), s.seconds, s.seconds_lengths, s.seconds_lists,
               s.seconds_finish, s.threads, std::string(SyntheticModelName(*model)).c_str(),
               static_cast<unsigned long long>(a.seed), a.out.c_str());
  return kExitOk;
}

}  // namespace search::cli
