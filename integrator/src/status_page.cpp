// The page at GET /: plain HTML and a small script. On the left a search box (query, mode, k) that
// calls GET /search with highlight=true and track_total_hits=true and lists the hits: id, score,
// highlighted snippet, the _source, total hits, took and shard coverage, or the 400's reason.
// GET /?q=...&mode=...&k=... fills the box and searches at load. On the right the live status:
// it fetches /health and /stats once a second and shows health, shards, QPS, latency percentiles
// and the result cache, with sparklines of the last two minutes. No external assets, so it works
// on an isolated host. Only the highlight fragments are parsed as HTML, and of them only text and
// <em> survive; ids, _source and every other field are inserted as text. With --api-keys the page
// itself is served without a key (it holds no data) but its fetches are not: a 401 or 403 shows a
// key field (the id:key that `searchctl apikey create` prints, or its base64), pauses the refreshes
// and shows the refusal's reason; the key given is kept in sessionStorage (this tab only, until it
// closes) and sent on every fetch as `Authorization: ApiKey base64(id:key)`. Without keys nothing is
// refused and the field stays hidden. The element ids (q, mode, k, search-form, results with li.hit
// rows, total, took, coverage; key-form, api-key, key-err; qps, p50, p95, p99, p999, hit, refreshes,
// updated, shards...) are what tests/browser reads.
#include "integrator/http_front.hpp"

namespace search {

const std::string& StatusPageHtml() {
  static const std::string kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>search cluster</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; }
h2 { font-size: 1.05em; margin: 1.2em 0 .3em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: .25em .7em; text-align: left; }
th { background: #f4f4f4; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { padding: .1em .6em; border-radius: .3em; font-size: .8em; vertical-align: middle; }
.green { color: #fff; background: #2e7d32; } .yellow { color: #000; background: #fbc02d; }
.red { color: #fff; background: #c62828; } .unknown { color: #fff; background: #777; }
.up { color: #2e7d32; font-weight: 600; } .down, .mismatch { color: #c62828; font-weight: 600; }
.meta { color: #666; margin: 0; }
.stale .meta { color: #c62828; }
#err { color: #c62828; min-height: 1.4em; }
.tiles { display: flex; flex-wrap: wrap; gap: 1em; }
.tile { border: 1px solid #ccc; border-radius: .4em; padding: .6em .9em; min-width: 15em; }
.tile .label { color: #666; font-size: .85em; }
.tile .big { font-size: 1.9em; font-weight: 600; font-variant-numeric: tabular-nums; }
.tile .small { color: #444; font-size: .85em; font-variant-numeric: tabular-nums; }
svg.spark { display: block; width: 100%; height: 2.5em; margin-top: .3em; background: #fafafa; }
svg.spark polyline { fill: #e3f2fd; stroke: #1565c0; stroke-width: 1.5; vector-effect: non-scaling-stroke; }
.cols { display: grid; grid-template-columns: minmax(0, 5fr) minmax(0, 6fr); gap: 2.5em; align-items: start; }
@media (max-width: 1000px) { .cols { grid-template-columns: minmax(0, 1fr); } }
#status-pane { overflow-x: auto; }
#status-pane table { font-size: .88em; }
#status-pane th, #status-pane td { padding: .2em .45em; }
#search-form { display: flex; flex-wrap: wrap; gap: .5em; align-items: center; margin: .4em 0; }
#search-form input, #search-form select, #search-form button { font: inherit; padding: .25em .4em; }
#q { flex: 1 1 14em; min-width: 10em; }
#k { width: 5em; }
#search-meta { color: #444; margin: .3em 0; font-variant-numeric: tabular-nums; }
#search-err { color: #c62828; }
#search-warn { color: #8a6d00; }
#results { padding-left: 1.8em; margin: .4em 0; }
li.hit { margin: 0 0 .8em; }
.hit-head { display: flex; gap: .8em; align-items: baseline; }
.hit-id { font-weight: 600; overflow-wrap: anywhere; }
.hit-score, .hit-where { color: #666; font-size: .85em; font-variant-numeric: tabular-nums; }
.snippet { margin: .15em 0; color: #333; overflow-wrap: anywhere; }
.snippet em { font-style: normal; font-weight: 600; background: #fff59d; }
.source-missing { color: #8a6d00; font-size: .85em; }
details.source summary { color: #1565c0; cursor: pointer; font-size: .85em; }
#key-form { display: flex; flex-wrap: wrap; gap: .5em; align-items: center; margin: 0 0 1em; padding: .4em .8em;
  border: 1px solid #fbc02d; border-radius: .4em; background: #fffde7; }
#key-form[hidden] { display: none; }
#key-form input, #key-form button { font: inherit; padding: .25em .4em; }
#api-key { flex: 0 1 28em; }
#key-err { color: #c62828; }
details.source pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #fafafa; border: 1px solid #eee;
  padding: .4em; margin: .2em 0; max-height: 20em; overflow-y: auto; font-size: .85em; }
</style>
</head>
<body>
<form id="key-form" hidden autocomplete="off">
<label for="api-key">API key</label>
<input id="api-key" type="password" placeholder="id:key from searchctl apikey create, or its base64">
<button id="key-submit" type="submit">use key</button>
<span id="key-err"></span> <span class="meta">(kept in this tab only)</span>
</form>
<div class="cols">
<section id="search-pane">
<h1>search</h1>
<form id="search-form" autocomplete="off">
<input id="q" name="q" type="search" placeholder="words, +must, -must_not, &quot;a phrase&quot;, (groups)"
 aria-label="query">
<select id="mode" name="mode" aria-label="mode"><option value="and" selected>and</option>
<option value="or">or</option><option value="andor">andor</option></select>
<label>k <input id="k" name="k" type="number" min="0" max="10000" value="10"></label>
<button id="search-submit" type="submit">search</button>
</form>
<p id="search-meta"><span id="total"></span> <span id="total-label"></span> <span id="took"></span>
<span id="coverage"></span> <span id="cached"></span></p>
<div id="search-err"></div>
<div id="search-warn"></div>
<ol id="results" data-state="idle" data-seq="0"></ol>
</section>
<section id="status-pane">
<h1>search cluster <span id="status" class="badge unknown">...</span></h1>
<p class="meta"><span id="shards-up">? shards</span> &middot; updated <span id="updated">never</span>
&middot; refresh #<span id="refreshes">0</span> (every 1 s)</p>
<div id="err"></div>
<div class="tiles">
<div class="tile"><div class="label">queries per second (last 10 s)</div><div class="big" id="qps"></div>
<div class="small">requests <span id="requests"></span>, errors <span id="errors"></span>,
rejected <span id="rejected"></span>, in flight <span id="inflight"></span></div>
<svg class="spark" id="qps-spark" viewBox="0 0 120 40" preserveAspectRatio="none"><polyline points=""/></svg></div>
<div class="tile"><div class="label">latency p99 (ms, last 10 s)</div><div class="big" id="p99-big"></div>
<div class="small"><span id="samples"></span> samples, partial <span id="partial"></span>,
late replies <span id="late"></span></div>
<svg class="spark" id="p99-spark" viewBox="0 0 120 40" preserveAspectRatio="none"><polyline points=""/></svg></div>
<div class="tile"><div class="label">result cache hit ratio (since start)</div><div class="big" id="hit"></div>
<div class="small">hits <span id="hits"></span>, misses <span id="misses"></span>,
<span id="entries"></span> entries, <span id="mib"></span> / <span id="cap-mib"></span> MiB,
evictions <span id="evictions"></span></div>
<svg class="spark" id="hit-spark" viewBox="0 0 120 40" preserveAspectRatio="none"><polyline points=""/></svg></div>
</div>
<h2>latency percentiles (ms, last 10 s)</h2>
<table id="latency">
<tr><th>p50</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>
<tr><td class="num" id="p50"></td><td class="num" id="p95"></td><td class="num" id="p99"></td>
<td class="num" id="p999"></td><td class="num" id="max"></td></tr>
</table>
<h2>shards</h2>
<table id="shards">
<tr><th>shard</th><th>endpoint</th><th>state</th><th>last seen ms</th><th>node state</th><th>docs</th>
<th>in flight</th><th>queued</th><th>gpu</th><th>last error</th></tr>
</table>
<p>API: <code>GET /search?q=...&amp;k=10&amp;mode=and|or|andor</code>, <code>&amp;track_total_hits=true</code>,
<code>&amp;highlight=true</code>, <code>&amp;_source=false</code> (q: words,
<code>+must</code>, <code>-must_not</code>, <code>"a phrase"</code>, <code>(groups)</code>), <code>POST /search</code>
(Elasticsearch query DSL), <code>GET /count?q=...</code>, <code>/_search</code>, <code>/_count</code>,
<a href="/health">/health</a>, <a href="/stats">/stats</a>.</p>
</section>
</div>
<script>
const kPoints = 120;  // sparkline history: two minutes at one refresh a second
const hist = { qps: [], p99: [], hit: [] };
let refreshes = 0;
function $(id) { return document.getElementById(id); }
function set(id, text) { $(id).textContent = text; }
function fix(x, d) { return (typeof x === 'number' && isFinite(x)) ? x.toFixed(d) : ''; }
function cell(row, text, cls) {
  const td = row.insertCell(); td.textContent = text; if (cls) td.className = cls; return td;
}
function spark(id, key, value) {
  const h = hist[key]; h.push(value); if (h.length > kPoints) h.shift();
  const top = Math.max(...h) || 1;  // scaled to the largest value shown (aria-label holds it)
  const dx = 120 / Math.max(h.length - 1, 1);  // fills the width until kPoints are shown
  const pts = h.map((v, i) => (i * dx).toFixed(1) + ',' + (39 - 37 * v / top).toFixed(1));
  pts.push((dx * (h.length - 1)).toFixed(1) + ',40', '0,40');  // closes the area under the line
  $(id).setAttribute('aria-label', key + ' over the last ' + h.length + ' s, top ' + fix(top, 2));
  $(id).firstElementChild.setAttribute('points', pts.join(' '));
}
// ---- the API key (search-integrator --api-keys): asked for on a 401 or 403, kept in sessionStorage
const kKeyItem = 'search-api-key';  // base64(id:key), as sent
let keyWait = false;  // a key was refused: refreshes pause until another is given
let pendingSearch = null;  // [q, mode, k] of a search refused for want of a key, run once one is given
function apiKey() { return sessionStorage.getItem(kKeyItem); }
function apiFetch(url, key) { return fetch(url, key ? {headers: {Authorization: 'ApiKey ' + key}} : {}); }
// An answer refused the key sent with it (401: none or malformed, 403: wrong): the field shows with
// the reason, unless another key was given since (then the caller retries with that one).
function keyRefused(status, reason, sent) {
  if (apiKey() !== sent) return;
  sessionStorage.removeItem(kKeyItem);
  keyWait = true;
  $('key-form').hidden = false;
  set('key-err', 'HTTP ' + status + ': ' + reason);
  if (document.activeElement === document.body) $('api-key').focus();
}
function keyAccepted() { if (!keyWait) { $('key-form').hidden = true; set('key-err', ''); } }
async function get(path) {  // the JSON of a 200 answer (no caching headers are sent, so none is cached)
  const key = apiKey();
  const r = await apiFetch(path, key);
  if (r.status === 401 || r.status === 403) {
    let why = '';
    try { const e = (await r.json()).error; why = e.reason || e.type; } catch (e) { why = r.statusText; }
    keyRefused(r.status, why, key);
    return null;
  }
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  keyAccepted();
  return r.json();
}
let refreshTimer = 0, refreshing = false;
async function refresh() {
  refreshing = true;
  try {
    const [h, s] = await Promise.all([get('/health'), get('/stats')]);
    const st = $('status');
    if (!h || !s) { st.textContent = 'API key needed'; st.className = 'badge unknown'; return; }
    st.textContent = h.status; st.className = 'badge ' + h.status;
    set('err', h.error || '');
    const up = h.shards.filter(x => x.state === 'up').length;
    set('shards-up', up + '/' + h.shards.length + ' shards up');
    set('qps', fix(s.qps, 1));
    set('requests', s.requests_total); set('errors', s.errors_total);
    set('rejected', s.rejected_total); set('inflight', s.in_flight);
    const lat = s.latency_ms;
    // Three significant digits below 1 ms: a result-cache hit takes a few us, and two decimals showed it as 0.00.
    const ms = x => lat.samples > 0 ? (typeof x === 'number' && x < 1 ? String(Number(x.toPrecision(3))) : fix(x, 2)) : '\u2013';
    for (const p of ['p50', 'p95', 'p99', 'p999', 'max']) set(p, ms(lat[p]));
    set('p99-big', ms(lat.p99)); set('samples', lat.samples);
    set('partial', s.partial_total); set('late', s.late_replies_total);
    const c = s.cache;
    set('hit', c.hits + c.misses > 0 ? fix(100 * c.hit_ratio, 1) + '%' : '\u2013');  // no lookups yet
    set('hits', c.hits); set('misses', c.misses); set('entries', c.entries);
    set('mib', fix(c.bytes / 1048576, 2)); set('cap-mib', fix(c.capacity_bytes / 1048576, 0));
    set('evictions', c.evictions);
    spark('qps-spark', 'qps', s.qps); spark('p99-spark', 'p99', lat.p99); spark('hit-spark', 'hit', c.hit_ratio);
    const t = $('shards');
    while (t.rows.length > 1) t.deleteRow(1);
    for (const sh of h.shards) {
      const r = t.insertRow();
      cell(r, sh.shard, 'num'); cell(r, sh.endpoint); cell(r, sh.state, sh.state);
      cell(r, sh.last_seen_ms === null ? 'never' : sh.last_seen_ms, 'num'); cell(r, sh.node_state);
      cell(r, sh.doc_end > sh.doc_begin ? sh.doc_begin + '..' + sh.doc_end : '');
      cell(r, sh.in_flight, 'num'); cell(r, sh.queued, 'num'); cell(r, sh.gpu ? 'yes' : 'no');
      cell(r, sh.last_error || '');
    }
    refreshes += 1;
    set('refreshes', refreshes);
    set('updated', new Date().toLocaleTimeString());
    document.body.classList.remove('stale');
  } catch (e) {
    set('err', 'integrator unreachable: ' + e.message + ' (showing the last values)');
    $('status').textContent = 'unreachable'; $('status').className = 'badge red';
    document.body.classList.add('stale');
  } finally {
    refreshing = false;
    if (!keyWait) refreshTimer = setTimeout(refresh, 1000);  // after the answer: a slow integrator is not piled on
  }
}
refresh();
$('key-form').addEventListener('submit', ev => {
  ev.preventDefault();
  const v = $('api-key').value.trim();
  if (!v) return;
  let key = v;  // id:key as `searchctl apikey create` prints it, or already its base64
  if (v.includes(':')) {
    try { key = btoa(v); } catch (e) { set('key-err', 'an id:key is ASCII'); return; }
  }
  sessionStorage.setItem(kKeyItem, key);
  $('api-key').value = '';
  set('key-err', 'trying the key\u2026');
  keyWait = false;
  clearTimeout(refreshTimer);
  if (!refreshing) refresh();
  if (pendingSearch) { const p = pendingSearch; pendingSearch = null; search(...p); }
});

// ---- the search box
let searchSeq = 0;  // an answer to an older submit than the latest is dropped
const kSnippetChars = 300;  // shown from _source.contents when there is no highlight
function el(tag, cls, text) {
  const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
// A highlight fragment is HTML-escaped text with <em> markers. It is parsed inert (a template
// runs no script and loads nothing) and rebuilt from its text and <em> elements alone, so even
// a fragment that broke that contract could not inject markup.
function fragmentNodes(html) {
  const t = document.createElement('template'); t.innerHTML = html;
  const out = document.createDocumentFragment();
  const copy = (from, to) => {
    for (const n of from.childNodes) {
      if (n.nodeType === Node.TEXT_NODE) to.appendChild(document.createTextNode(n.nodeValue));
      else if (n.nodeType === Node.ELEMENT_NODE && n.tagName === 'EM') copy(n, to.appendChild(el('em')));
      else if (n.nodeType === Node.ELEMENT_NODE) to.appendChild(document.createTextNode(n.textContent));
    }
  };
  copy(t.content, out);
  return out;
}
function showHit(list, h) {
  const li = el('li', 'hit'); li.dataset.id = String(h._id);
  const head = li.appendChild(el('div', 'hit-head'));
  head.appendChild(el('span', 'hit-id', String(h._id)));
  const sc = head.appendChild(el('span', 'hit-score', typeof h._score === 'number' ? h._score.toFixed(4) : ''));
  sc.dataset.score = String(h._score); sc.title = 'score ' + h._score;
  head.appendChild(el('span', 'hit-where', 'shard ' + h._shard + ', doc ' + h._doc));
  const frags = h.highlight && Array.isArray(h.highlight.contents) ? h.highlight.contents : [];
  const src = h._source;
  if (frags.length > 0) {
    const sn = li.appendChild(el('div', 'snippet'));
    frags.forEach((f, i) => { if (i > 0) sn.appendChild(document.createTextNode(' \u2026 ')); sn.appendChild(fragmentNodes(String(f))); });
  } else if (src && typeof src.contents === 'string') {
    const c = src.contents;
    li.appendChild(el('div', 'snippet', c.length > kSnippetChars ? c.slice(0, kSnippetChars) + '\u2026' : c));
  }
  if (src !== undefined) {
    const d = li.appendChild(el('details', 'source'));
    d.appendChild(el('summary', '', '_source'));
    d.appendChild(el('pre', '', JSON.stringify(src, null, 1)));
  } else if (h._source_missing) {
    li.appendChild(el('div', 'source-missing', 'source ' + h._source_missing));
  }
  list.appendChild(li);
}
function clearSearch() {
  for (const id of ['total', 'total-label', 'took', 'coverage', 'cached', 'search-err', 'search-warn']) set(id, '');
  $('results').replaceChildren();
}
async function search(q, mode, k) {
  const seq = ++searchSeq;
  const list = $('results');
  list.dataset.state = 'loading';
  const params = new URLSearchParams({q: q, mode: mode, k: k, highlight: 'true', track_total_hits: 'true'});
  let a = null, status = 0, failure = '';
  const key = apiKey();
  try {
    const r = await apiFetch('/search?' + params.toString(), key);
    status = r.status;
    const text = await r.text();
    try { a = JSON.parse(text); } catch (e) { failure = 'HTTP ' + r.status + ': not JSON: ' + text.slice(0, 200); }
  } catch (e) {
    failure = 'integrator unreachable: ' + e.message;
  }
  if (seq !== searchSeq) return;  // a newer search was submitted meanwhile
  clearSearch();
  if (!failure && (status !== 200 || !a || a.error || !a.hits)) {
    const why = a && a.error ? (a.error.reason || a.error.type || JSON.stringify(a.error)) : 'no hits in the answer';
    failure = 'HTTP ' + status + ': ' + why;
  }
  if (status === 401 || status === 403) {
    keyRefused(status, a && a.error ? a.error.reason : '', key);
    if (!keyWait) return search(q, mode, k);  // another key was given meanwhile: try it
    pendingSearch = [q, mode, k];
  } else if (status !== 0) {
    keyAccepted();
  }
  if (failure) {
    set('search-err', failure);
    list.dataset.state = 'error'; list.dataset.seq = String(seq);
    return;
  }
  const t = a.hits.total;
  if (t && typeof t === 'object') {
    set('total', String(t.value));
    set('total-label', t.relation === 'eq' ? 'hits,' : 'or more hits (not every shard answered),');
  } else {
    set('total', '');
    set('total-label', a.hits.hits.length + ' shown (total not counted),');
  }
  set('took', 'took ' + (typeof a.took_us === 'number' ? fix(a.took_us / 1000, 2) : a.took) + ' ms,');
  const c = a.coverage, sh = a._shards;
  if (c) set('coverage', 'shards ' + c.shards + '/' + c.shards_total + ', documents ' + fix(c.percent, 1) + '%');
  if (a.cached) set('cached', '(cached)');
  const fails = sh && Array.isArray(sh.failures) ? sh.failures : [];
  const warn = fails.map(f => 'shard ' + f.shard + ': ' + f.reason);
  if (a.timed_out) warn.unshift('timed out: the hits are those found within the deadline');
  set('search-warn', warn.join('; '));
  for (const h of a.hits.hits) showHit(list, h);
  list.dataset.state = 'done'; list.dataset.seq = String(seq);
}
$('search-form').addEventListener('submit', ev => {
  ev.preventDefault();
  const q = $('q').value, mode = $('mode').value, k = $('k').value.trim() || '10';
  history.replaceState(null, '', '?' + new URLSearchParams({q: q, mode: mode, k: k}).toString());
  search(q, mode, k);
});
{  // GET /?q=...&mode=...&k=... searches at load: a result page can be linked
  const u = new URLSearchParams(location.search);
  if (u.has('mode')) $('mode').value = u.get('mode');
  if (u.has('k')) $('k').value = u.get('k');
  if (u.has('q')) { $('q').value = u.get('q'); search($('q').value, $('mode').value, $('k').value.trim() || '10'); }
}
</script>
</body>
</html>
)HTML";
  return kPage;
}

}  // namespace search
