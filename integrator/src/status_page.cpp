// The status page at GET /: plain HTML and a small script that fetches /health and /stats every
// second. No external assets, so it works on an isolated host.
#include "integrator/http_front.hpp"

namespace search {

const std::string& StatusPageHtml() {
  static const std::string kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>search cluster</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: .2em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: .3em .7em; text-align: left; }
th { background: #f4f4f4; }
.green { color: #fff; background: #2e7d32; } .yellow { color: #000; background: #fbc02d; }
.red { color: #fff; background: #c62828; } .badge { padding: .1em .6em; border-radius: .3em; }
.up { color: #2e7d32; } .down, .mismatch { color: #c62828; }
#err { color: #c62828; }
</style>
</head>
<body>
<h1>search cluster <span id="status" class="badge">...</span></h1>
<div id="err"></div>
<table>
<tr><th>QPS (10 s)</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>in flight</th>
<th>cache hit ratio</th><th>cache entries</th><th>cache MiB</th><th>partial</th><th>late replies</th></tr>
<tr><td id="qps"></td><td id="p50"></td><td id="p95"></td><td id="p99"></td><td id="p999"></td><td id="inflight"></td>
<td id="hit"></td><td id="entries"></td><td id="mib"></td><td id="partial"></td><td id="late"></td></tr>
</table>
<table id="shards">
<tr><th>shard</th><th>endpoint</th><th>state</th><th>last seen ms</th><th>node state</th><th>docs</th>
<th>in flight</th><th>queued</th><th>gpu</th><th>last error</th></tr>
</table>
<p>API: <code>GET /search?q=...&amp;k=10&amp;mode=and|or|andor</code>, <code>POST /search</code>,
<a href="/health">/health</a>, <a href="/stats">/stats</a>.</p>
<script>
function cell(row, text, cls) { const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; }
function fix(x, d) { return (typeof x === 'number') ? x.toFixed(d) : ''; }
async function refresh() {
  try {
    const [h, s] = await Promise.all([fetch('/health').then(r => r.json()), fetch('/stats').then(r => r.json())]);
    const st = document.getElementById('status');
    st.textContent = h.status; st.className = 'badge ' + h.status;
    document.getElementById('err').textContent = h.error || '';
    document.getElementById('qps').textContent = fix(s.qps, 1);
    for (const p of ['p50', 'p95', 'p99', 'p999']) document.getElementById(p).textContent = fix(s.latency_ms[p], 2);
    document.getElementById('inflight').textContent = s.in_flight;
    document.getElementById('hit').textContent = fix(s.cache.hit_ratio, 3);
    document.getElementById('entries').textContent = s.cache.entries;
    document.getElementById('mib').textContent = fix(s.cache.bytes / 1048576, 2);
    document.getElementById('partial').textContent = s.partial_total;
    document.getElementById('late').textContent = s.late_replies_total;
    const t = document.getElementById('shards');
    while (t.rows.length > 1) t.deleteRow(1);
    for (const sh of h.shards) {
      const r = t.insertRow();
      cell(r, sh.shard); cell(r, sh.endpoint); cell(r, sh.state, sh.state);
      cell(r, sh.last_seen_ms === null ? 'never' : sh.last_seen_ms); cell(r, sh.node_state);
      cell(r, sh.doc_end > sh.doc_begin ? sh.doc_begin + '..' + sh.doc_end : ''); cell(r, sh.in_flight);
      cell(r, sh.queued); cell(r, sh.gpu ? 'yes' : 'no'); cell(r, sh.last_error || '');
    }
  } catch (e) {
    document.getElementById('err').textContent = 'integrator unreachable: ' + e;
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace search
