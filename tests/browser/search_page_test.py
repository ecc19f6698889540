#!/usr/bin/env python3
"""The search box of the integrator's page (GET /) in a real browser, against a real cluster.

Indexes a small JSON-lines corpus of known documents (extra fields, unicode, markup in ids and
text, a long document) into 2 shards with `searchctl index`, starts a local cluster with
scripts/cluster.sh on its own port range, and drives headless Chromium over the DevTools protocol
(the client of browser_harness.py): it types a query into the box (Input.insertText after
focusing), picks the mode, types k, clicks the submit button (mouse events at its position) and
waits for the results. Then it checks the DOM against GET /search sent by this script with the
same parameters and against the corpus itself:
  - the answer itself: the ids are documents holding a query term, k of them; total hits is the
    brute-force count with relation eq; every hit has its input object as _source and a highlight;
  - the hit rows (li.hit) carry the answer's ids in the answer's order and its scores; took is a
    number; coverage says 2/2 shards, 100% of documents; the first hit's _source opens on a click;
  - ids and _source are text: an id and a contents field full of markup show literally, add no
    element and run no script; each hit's _source (shown whole) equals the input line's object;
  - the snippets are the answer's highlight fragments: every <em> in the DOM wraps a query term,
    the same marks as the answer's, and both query terms are marked somewhere;
  - a query the integrator refuses shows the 400's reason and no rows;
  - the page's address with q, mode and k opens with that search filled in and done;
  - the live status beside it is still there and green, and no API key field shows (no keys asked).
It saves the page with the results as a screenshot (PNG, DevTools) and checks it is a nonblank PNG
of the window size. Exit 77 (CTest SKIP) when Chromium is not installed. The cluster and the browser
are stopped on any exit (normal, failure, SIGTERM/SIGINT).

usage: search_page_test.py --source REPO --build BUILD [--screenshot PNG] [--base-port P]
  base port: --base-port, else $SEARCH_BROWSER_BASE_PORT + 20, else 9620 (uses P .. P+13).
  chromium: $CHROMIUM, else `chromium` or `chromium-browser` on PATH.
"""
import html
import json
import os
import random
import re
import sys
import time
import urllib.error
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browser_harness as bh  # noqa: E402  (the DevTools client, cluster and browser handling)
from browser_harness import Failed, get_json, log, run  # noqa: E402

SHARDS = 2
QUERY = "Gold heart"  # typed as a user would; the analyzer lowercases
TERMS = {"gold", "heart"}
MODE, K = "or", 6
BAD_QUERY = "gold (heart"  # an unclosed group: the integrator answers 400 with a reason
TOKEN = re.compile(rb"[A-Za-z0-9\x80-\xff]+")  # the default analyzer (core/analyzer.hpp)
XSS_ID = '<b id="xss-id">bold</b> & "quotes"'
ALLOWED_TAGS = {"LI", "DIV", "SPAN", "EM", "DETAILS", "SUMMARY", "PRE"}


def corpus():
    """The documents: a few that hold the query terms, many that hold neither."""
    long_text = " ".join(
        ["The assayer weighed the gold dust twice; gold was his heart's whole trade."] +
        ["Caravans crossed the dunes for weeks, trading salt, cloth and spice in every oasis town."] * 12 +
        ["At the end of the road the old trader said his heart had stayed with the gold in the mountains."] +
        ["Winter came early and the passes closed under snow."] * 8 +
        ["He left a purse of gold and a letter for the heart of the family: gold for the heart."])
    docs = [
        {"id": "gold-1", "title": "Heart of gold", "year": 1972,
         "contents": "A heart of gold: the miner found gold in the river, and his heart was glad."},
        {"id": "gold-2", "title": "Metals", "tags": ["chemistry", "au"],
         "contents": "Gold is a soft, yellow metal. Gold coins and gold leaf are made from it."},
        {"id": "heart-1", "contents": "The heart pumps blood; a strong heart beats slowly at rest."},
        {"id": XSS_ID, "note": "<img src=x onerror=\"window.pwned=2\">",
         "contents": "<script>window.pwned = 1</script> Markup & <i>gold</i> stays text: "
                     "a \"heart\" of <b>gold</b> & nothing runs."},
        {"id": "unicode-1", "contents": "Caf\u00e9 Z\u00fcrich \u2014 goldene Herzen? No: gold and heart, "
                                        "na\u00efve r\u00e9sum\u00e9 \u2713 \U0001F600."},
        {"id": "long-1", "contents": long_text},
        {"id": "heart-2", "title": "Anatomy", "contents": "Four chambers make the heart; the heart never rests."},
        {"id": "neither", "contents": "Silver and bronze medals, but no yellow metal here."},
    ]
    words = ("river stone table window garden silver bronze winter summer road market bread apple "
             "music paper letter house cloud rain salt spice cloth dune oasis mountain valley forest "
             "copper iron bridge tower lamp candle harbor ship sail wind storm field wheat barley "
             "horse cart wheel clock bell song story book pen ink desk chair door key lock").split()
    rng = random.Random(7)
    fillers = [{"id": "filler-%03d" % i, "contents": " ".join(rng.choice(words) for _ in range(rng.randint(5, 40)))
                + "."} for i in range(300)]
    for i, d in enumerate(docs):  # spread over the input, so over both shards' docID ranges
        fillers.insert(i * 47, d)
    return fillers


def tokens(text):
    return {t.lower().decode("utf-8", "replace") for t in TOKEN.findall(text.encode("utf-8"))}


def em_texts(fragment):
    return re.findall(r"<em>(.*?)</em>", fragment, flags=re.S)


class SearchTest(bh.BrowserTest):
    def main(self):
        a = self.args
        self.check_ports(SHARDS)
        docs = corpus()
        self.docs = {d["id"]: d for d in docs}
        jsonl, index = os.path.join(self.tmp, "docs.jsonl"), os.path.join(self.tmp, "index")
        with open(jsonl, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        run([a.searchctl, "index", "--input", jsonl, "--out", index, "--shards", str(SHARDS), "--quiet"])
        self.start_cluster(index)
        self.base = "http://127.0.0.1:%d" % self.port

        dt = self.start_browser()
        try:
            dt.call("Emulation.setDeviceMetricsOverride", width=bh.WINDOW[0], height=bh.WINDOW[1],
                    deviceScaleFactor=1, mobile=False)
            dt.call("Page.navigate", url=self.base + "/")
            self.wait(dt, "document.readyState === 'complete' && !!document.getElementById('search-form') "
                          "&& document.getElementById('status').textContent === 'green'", "the page and green status")

            page = self.submit(dt, QUERY, MODE, K, seq=1)
            want = self.api(QUERY, MODE, K)  # after the page's, which so is no cache hit
            self.check_api(want, docs)
            log("GET /search: ids %s, total %s" % ([h["_id"] for h in want["hits"]["hits"]], want["hits"]["total"]))
            self.check_page(page, want)
            self.open_first_source(dt, want)
            shot = os.path.abspath(a.screenshot)
            w, h, distinct = self.capture(dt, shot)
            log("screenshot %s: %dx%d PNG, %d bytes, %d distinct byte values"
                % (shot, w, h, os.path.getsize(shot), distinct))

            bad = self.api_error(BAD_QUERY, MODE, K)
            page = self.submit(dt, BAD_QUERY, MODE, K, seq=2)
            if page["state"] != "error" or page["rows"]:
                raise Failed("a refused query: state %r, %d rows" % (page["state"], len(page["rows"])))
            if page["ids"]["search-err"] != "HTTP 400: " + bad["error"]["reason"]:
                raise Failed("a refused query shows %r, want the 400's reason %r"
                             % (page["ids"]["search-err"], bad["error"]["reason"]))
            if page["ids"]["total"] or page["ids"]["took"]:
                raise Failed("a refused query still shows the last answer's total/took: %s" % page["ids"])
            log("refused query: page shows %r" % page["ids"]["search-err"])

            # An address with a query opens with that search done.
            params = {"q": "heart", "mode": "and", "k": "3"}
            dt.call("Page.navigate", url=self.base + "/?" + urllib.parse.urlencode(params))
            self.wait(dt, "location.search.includes('q=heart') && (() => { const r = document.getElementById("
                          "'results'); return r && r.dataset.seq === '1' && r.dataset.state === 'done'; })()",
                      "the search of the page's address")
            page = self.read(dt)
            want = self.api("heart", "and", 3)
            form = self.evaluate(dt, "['q', 'mode', 'k'].map(i => document.getElementById(i).value)")
            if [r["id"] for r in page["rows"]] != [h["_id"] for h in want["hits"]["hits"]] or \
                    form != ["heart", "and", "3"]:
                raise Failed("/?%s shows rows %s and form %s, GET /search gives %s"
                             % (urllib.parse.urlencode(params), [r["id"] for r in page["rows"]], form,
                                [h["_id"] for h in want["hits"]["hits"]]))
            log("/?%s opens with %d rows" % (urllib.parse.urlencode(params), len(page["rows"])))
        finally:
            dt.close()
            bh.kill_group(self.browser)
            self.browser = None

    # ---- the API, from this script
    def url(self, q, mode, k):
        return self.base + "/search?" + urllib.parse.urlencode(
            {"q": q, "mode": mode, "k": k, "highlight": "true", "track_total_hits": "true"})

    def api(self, q, mode, k):
        try:
            return get_json(self.url(q, mode, k))
        except urllib.error.HTTPError as e:
            raise Failed("GET /search %r: HTTP %d: %s" % (q, e.code, e.read()[:500]))

    def api_error(self, q, mode, k):
        try:
            get_json(self.url(q, mode, k))
        except urllib.error.HTTPError as e:
            if e.code != 400:
                raise Failed("GET /search %r: HTTP %d, want 400" % (q, e.code))
            return json.loads(e.read())
        raise Failed("GET /search %r answered 200, want 400" % q)

    def check_api(self, want, docs):
        """The answer itself against the corpus: the documents holding a term, all counted."""
        matching = [d["id"] for d in docs if tokens(d["contents"]) & TERMS]
        hits = want["hits"]["hits"]
        if want["hits"]["total"] != {"value": len(matching), "relation": "eq"}:
            raise Failed("GET /search total %s, want %d (eq): %s" % (want["hits"]["total"], len(matching), matching))
        if len(hits) != min(K, len(matching)) or not {h["_id"] for h in hits} <= set(matching):
            raise Failed("GET /search ids %s, want %d of %s" % ([h["_id"] for h in hits], K, matching))
        if len(matching) <= K:
            raise Failed("the corpus should hold more matches than k")
        for h in hits:  # each hit holds a query term in its contents: a source and a highlight
            if h.get("_source") != self.docs[h["_id"]]:
                raise Failed("GET /search: hit %r has _source %r, want its input object %r"
                             % (h["_id"], h.get("_source"), self.docs[h["_id"]]))
            frags = h.get("highlight", {}).get("contents")
            if not frags or not all(em_texts(f) for f in frags):
                raise Failed("GET /search: hit %r has no highlight fragment with <em>: %s" % (h["_id"], h))

    # ---- the browser
    def wait(self, dt, expr, what, seconds=20):
        deadline = time.monotonic() + seconds
        while not self.evaluate(dt, expr):
            if time.monotonic() > deadline:
                raise Failed("%s not seen after %d s" % (what, seconds))
            time.sleep(0.1)

    def submit(self, dt, q, mode, k, seq):
        """Types q and k, picks mode, clicks submit; returns the DOM once answer `seq` is shown."""
        for field, text in (("q", q), ("k", str(k))):
            self.evaluate(dt, "(() => { const e = document.getElementById('%s'); e.focus(); e.select(); })()" % field)
            dt.call("Input.insertText", text=text)
            got = self.evaluate(dt, "document.getElementById('%s').value" % field)
            if got != text:
                raise Failed("typed %r into #%s, the box holds %r" % (text, field, got))
        self.evaluate(dt, "(() => { const m = document.getElementById('mode'); m.value = %s; "
                          "m.dispatchEvent(new Event('change')); })()" % json.dumps(mode))
        self.click(dt, "#search-submit")
        self.wait(dt, "(() => { const r = document.getElementById('results'); return r.dataset.seq === '%d' && "
                      "(r.dataset.state === 'done' || r.dataset.state === 'error'); })()" % seq,
                  "answer #%d in the page" % seq)
        return self.read(dt)

    def click(self, dt, selector):
        box = self.evaluate(dt, "(() => { const r = document.querySelector(%s).getBoundingClientRect(); "
                                "return [r.x + Math.min(r.width / 2, 20), r.y + r.height / 2]; })()"
                            % json.dumps(selector))
        for kind in ("mousePressed", "mouseReleased"):
            dt.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def open_first_source(self, dt, want):
        """Clicks the first hit's "_source": the whole stored document shows, as given."""
        first = want["hits"]["hits"][0]
        if "_source" not in first:
            return
        self.click(dt, "#results > li.hit details.source summary")
        self.wait(dt, "document.querySelector('#results > li.hit details.source').open && "
                      "document.querySelector('#results > li.hit details.source pre').offsetHeight > 0",
                  "the first hit's _source opened")
        shown = self.evaluate(dt, "document.querySelector('#results > li.hit details.source pre').textContent")
        if json.loads(shown) != self.docs[first["_id"]]:
            raise Failed("the first hit's _source shows %r, want %r" % (shown, self.docs[first["_id"]]))

    def read(self, dt):
        expr = r"""JSON.stringify({
  state: document.getElementById('results').dataset.state,
  search: location.search,
  pwned: typeof window.pwned,
  key_hidden: document.getElementById('key-form').hidden,
  ids: Object.fromEntries(['total', 'total-label', 'took', 'coverage', 'search-err', 'search-warn', 'status']
                          .map(i => [i, document.getElementById(i).textContent])),
  tags: Array.from(document.querySelectorAll('#results *')).map(e => e.tagName),
  rows: Array.from(document.querySelectorAll('#results > li.hit')).map(li => ({
    data_id: li.dataset.id,
    id: li.querySelector('.hit-id').textContent,
    id_children: li.querySelector('.hit-id').children.length,
    score: li.querySelector('.hit-score').dataset.score,
    snippet: li.querySelector('.snippet') ? li.querySelector('.snippet').textContent : null,
    snippet_tags: li.querySelector('.snippet') ?
        Array.from(li.querySelector('.snippet').querySelectorAll('*')).map(e => e.tagName) : [],
    ems: Array.from(li.querySelectorAll('.snippet em')).map(e => e.textContent),
    source: li.querySelector('details.source pre') ? li.querySelector('details.source pre').textContent : null,
    missing: li.querySelector('.source-missing') ? li.querySelector('.source-missing').textContent : null}))})"""
        return json.loads(self.evaluate(dt, expr))

    def check_page(self, page, want):
        ids = page["ids"]
        log("page: %s" % json.dumps({k: v for k, v in page.items() if k != "rows"}))
        if page["state"] != "done" or ids["search-err"]:
            raise Failed("the search shows state %r, error %r" % (page["state"], ids["search-err"]))
        if urllib.parse.parse_qs(page["search"].lstrip("?")) != {"q": [QUERY], "mode": [MODE], "k": [str(K)]}:
            raise Failed("the page's address %r does not hold the query typed" % page["search"])
        hits, rows = want["hits"]["hits"], page["rows"]
        if [r["id"] for r in rows] != [h["_id"] for h in hits]:
            raise Failed("page ids %s, GET /search ids %s" % ([r["id"] for r in rows], [h["_id"] for h in hits]))
        for r, h in zip(rows, hits):
            if r["data_id"] != h["_id"] or float(r["score"]) != h["_score"]:
                raise Failed("row %r: data-id %r score %r, want score %r" % (r["id"], r["data_id"], r["score"],
                                                                            h["_score"]))
        total = want["hits"]["total"]
        if ids["total"] != str(total["value"]) or not ids["total-label"].startswith("hits"):
            raise Failed("page total %r %r, want %s" % (ids["total"], ids["total-label"], total))
        m = re.fullmatch(r"took (\d+(?:\.\d+)?) ms,", ids["took"])
        if not m:
            raise Failed("took %r is not 'took N ms,'" % ids["took"])
        if ids["coverage"] != "shards %d/%d, documents 100.0%%" % (SHARDS, SHARDS):
            raise Failed("coverage %r" % ids["coverage"])
        if ids["status"] != "green" or ids["search-warn"]:
            raise Failed("status %r, search warning %r" % (ids["status"], ids["search-warn"]))
        if not page["key_hidden"]:
            raise Failed("the API key field shows, though no fetch was refused")

        # Markup in ids and sources is text: no element beyond the page's own, no script run.
        if page["pwned"] != "undefined":
            raise Failed("a document's markup ran a script (window.pwned is %s)" % page["pwned"])
        stray = set(page["tags"]) - ALLOWED_TAGS
        if stray:
            raise Failed("the results hold elements %s: markup from a document was inserted as HTML" % stray)
        xss = [r for r in rows if r["id"] == XSS_ID]
        if not xss or xss[0]["id_children"]:
            raise Failed("the id %r is not shown as text in the rows: %s" % (XSS_ID, [r["id"] for r in rows]))

        for r, h in zip(rows, hits):
            doc = self.docs[h["_id"]]
            if r["source"] is None or json.loads(r["source"]) != doc:
                raise Failed("row %r: _source shown %r, input %r" % (r["id"], r["source"], doc))
            frags = h["highlight"]["contents"]
            marks = [t for f in frags for t in em_texts(f)]
            if r["ems"] != [html.unescape(t) for t in marks] or not marks:
                raise Failed("row %r: <em> marks %s in the DOM, %s in the answer" % (r["id"], r["ems"], marks))
            if set(r["snippet_tags"]) != {"EM"}:
                raise Failed("row %r: snippet elements %s, want <em> alone" % (r["id"], r["snippet_tags"]))
            text = " \u2026 ".join(html.unescape(re.sub(r"</?em>", "", f)) for f in frags)
            if r["snippet"] != text:
                raise Failed("row %r: snippet text %r, want the fragments' text %r" % (r["id"], r["snippet"], text))
        marked = {t.lower() for r in rows for t in r["ems"]}
        if marked != TERMS:
            raise Failed("<em> marks %s on the page, want exactly the query terms %s" % (marked, TERMS))
        if "<script>" not in (xss[0]["snippet"] or ""):
            raise Failed("the markup in %r's contents is not shown as text: %r" % (XSS_ID, xss[0]["snippet"]))
        log("page matches GET /search: %d rows %s, total %s, %s %s; <em> marks %s"
            % (len(rows), [r["id"] for r in rows], ids["total"], ids["took"], ids["coverage"], sorted(marked)))


if __name__ == "__main__":
    sys.exit(bh.main(SearchTest, "search_page_test", __doc__, "search_page.png", port_offset=20))
