#!/usr/bin/env python3
"""The integrator's page (GET /) in a real browser against a secured cluster: HTTPS, API keys, CURVE.

Indexes search_page_test.py's corpus into 2 shards, starts a cluster with `scripts/cluster.sh start
--secure` (docker/secrets-init.sh makes the CA, the certificate, the CURVE keys and one API key with
`searchctl apikey create`; the integrator runs with --api-keys and no --open-health) and drives
headless Chromium over DevTools, trusting the integrator's certificate by its public key alone
(--ignore-certificate-errors-spki-list). It checks, from this script, that GET / is served without
a key while /stats, /health and /search answer 401; then in the browser:
  - the page loads without a key and shows the API key field with the 401's reason; the status
    badge says a key is needed; a search submitted now shows the 401 and no rows;
  - a wrong key (the right id:key with its last character changed) shows the 403's reason (the same
    as GET /search's with that key), the field asks again, and nothing is kept in sessionStorage;
  - the right id:key, typed as `searchctl apikey create` printed it, hides the field, turns the
    status green, is kept in sessionStorage as base64(id:key) (nothing in localStorage or cookies),
    and runs the search refused before: its rows, scores, totals, snippets and <em> marks in the DOM
    equal GET /search's answer with the key (search_page_test.py's checks);
  - another address in the same tab searches at load without asking again;
  - with sessionStorage cleared, a reload asks again, and the key's base64 form is taken too.
It saves the page with the results as a screenshot and checks it is a nonblank PNG of the window
size. Exit 77 (CTest SKIP) when Chromium is not installed. The cluster and the browser are stopped
on any exit.

usage: api_key_page_test.py --source REPO --build BUILD [--screenshot PNG] [--base-port P]
  base port: --base-port, else $SEARCH_BROWSER_BASE_PORT + 40, else 9640 (uses P .. P+13).
"""
import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import browser_harness as bh  # noqa: E402  (the DevTools client, cluster and browser handling)
import search_page_test as sp  # noqa: E402  (the corpus and the DOM checks of the search box)
from browser_harness import Failed, log, run  # noqa: E402

KEY_ITEM = "search-api-key"  # the page's sessionStorage item


class ApiKeyPageTest(sp.SearchTest):
    def main(self):
        a = self.args
        self.check_ports(sp.SHARDS)
        docs = sp.corpus()
        self.docs = {d["id"]: d for d in docs}
        jsonl, index = os.path.join(self.tmp, "docs.jsonl"), os.path.join(self.tmp, "index")
        with open(jsonl, "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
        run([a.searchctl, "index", "--input", jsonl, "--out", index, "--shards", str(sp.SHARDS), "--quiet"])
        self.start_cluster(index, "--secure")
        secrets = os.path.join(self.run_dir, "secrets")
        self.idkey = open(os.path.join(self.run_dir, "api-key")).read().strip()
        if ":" not in self.idkey:
            raise Failed("the cluster's api-key %r is not id:key" % self.idkey)
        self.b64 = base64.b64encode(self.idkey.encode()).decode()
        wrong = self.idkey[:-1] + ("B" if self.idkey[-1] == "A" else "A")
        self.base = "https://localhost:%d" % self.port
        self.tls = ssl.create_default_context(cafile=os.path.join(secrets, "ca.pem"))

        # From this script: the page is open, what it fetches is not.
        status, page_html = self.fetch("/", None)
        if status != 200 or 'id="key-form"' not in page_html:
            raise Failed("GET / without a key: HTTP %d, want 200 with the page" % status)
        for path in ("/stats", "/health", "/search?q=gold"):
            status, _ = self.fetch(path, None)
            if status != 401:
                raise Failed("GET %s without a key: HTTP %d, want 401" % (path, status))
        status, refused = self.fetch(self.url(sp.QUERY, sp.MODE, sp.K)[len(self.base):],
                                     base64.b64encode(wrong.encode()).decode())
        if status != 403:
            raise Failed("GET /search with a wrong key: HTTP %d, want 403" % status)
        reason403 = json.loads(refused)["error"]["reason"]
        log("GET / 200 without a key; /stats, /health, /search 401; a wrong key 403 (%s)" % reason403)

        spki = subprocess.run(
            "openssl x509 -pubkey -noout -in '%s' | openssl pkey -pubin -outform der | "
            "openssl dgst -sha256 -binary | base64" % os.path.join(secrets, "integrator", "tls.crt"),
            shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True).stdout.strip()
        dt = self.start_browser("--ignore-certificate-errors-spki-list=" + spki)
        try:
            dt.call("Emulation.setDeviceMetricsOverride", width=bh.WINDOW[0], height=bh.WINDOW[1],
                    deviceScaleFactor=1, mobile=False)
            dt.call("Page.navigate", url=self.base + "/")
            self.wait(dt, "document.readyState === 'complete' && location.protocol === 'https:' && "
                          "(() => { const f = document.getElementById('key-form'); return !!f && !f.hidden; })()",
                      "the page and its API key field")
            state = self.key_state(dt)
            if not state["err"].startswith("HTTP 401: missing authentication credentials") or \
                    state["status"] != "API key needed" or state["stored"] is not None:
                raise Failed("without a key the page shows %s" % state)
            log("page loaded over HTTPS, asks for a key: %s" % state)

            page = self.submit(dt, sp.QUERY, sp.MODE, sp.K, seq=1)
            if page["state"] != "error" or page["rows"] or not page["ids"]["search-err"].startswith("HTTP 401: "):
                raise Failed("a search without a key: state %r, %d rows, %r"
                             % (page["state"], len(page["rows"]), page["ids"]["search-err"]))

            self.give_key(dt, wrong)  # the refused search runs again (seq 2) with it
            self.wait(dt, "document.getElementById('key-err').textContent.startsWith('HTTP 403') && "
                          "document.getElementById('results').dataset.seq === '2'", "the wrong key refused")
            state = self.key_state(dt)
            if state["err"] != "HTTP 403: " + reason403 or state["hidden"] or state["stored"] is not None:
                raise Failed("after a wrong key the page shows %s, want the field, empty storage and "
                             "'HTTP 403: %s'" % (state, reason403))
            log("a wrong key: %s" % state)

            self.give_key(dt, self.idkey)  # seq 3: the refused search, with the right key
            self.wait(dt, "document.getElementById('key-form').hidden && "
                          "document.getElementById('status').textContent === 'green' && "
                          "document.getElementById('results').dataset.seq === '3' && "
                          "document.getElementById('results').dataset.state === 'done'",
                      "the right key taken, the status green and the search done")
            state = self.key_state(dt)
            if state["stored"] != self.b64 or state["local"] != 0 or state["cookie"] != "":
                raise Failed("the key is kept as %s, want sessionStorage %r alone" % (state, self.b64))
            page = self.read(dt)
            want = self.api(sp.QUERY, sp.MODE, sp.K)
            self.check_api(want, docs)
            self.check_page(page, want)
            log("the right key: field hidden, status green, sessionStorage holds base64(id:key)")
            shot = os.path.abspath(a.screenshot)
            w, h, distinct = self.capture(dt, shot)
            log("screenshot %s: %dx%d PNG, %d distinct byte values" % (shot, w, h, distinct))

            # The same tab keeps the key: a linked search opens without asking.
            params = {"q": "heart", "mode": "and", "k": "3"}
            dt.call("Page.navigate", url=self.base + "/?" + urllib.parse.urlencode(params))
            self.wait(dt, "location.search.includes('q=heart') && (() => { const r = document.getElementById("
                          "'results'); return r && r.dataset.seq === '1' && r.dataset.state === 'done'; })()",
                      "the search of the page's address")
            page, want = self.read(dt), self.api("heart", "and", 3)
            if [r["id"] for r in page["rows"]] != [h["_id"] for h in want["hits"]["hits"]] or \
                    not page["key_hidden"] or not page["rows"]:
                raise Failed("/?%s with the kept key shows rows %s (key field hidden: %s), GET /search %s"
                             % (urllib.parse.urlencode(params), [r["id"] for r in page["rows"]],
                                page["key_hidden"], [h["_id"] for h in want["hits"]["hits"]]))
            log("/?%s opens with %d rows, no key asked" % (urllib.parse.urlencode(params), len(page["rows"])))

            # A new session asks again; the base64 form of the key is taken as it is.
            self.evaluate(dt, "sessionStorage.clear()")
            dt.call("Page.reload")
            self.wait(dt, "document.readyState === 'complete' && !document.getElementById('key-form').hidden && "
                          "document.getElementById('key-err').textContent.startsWith('HTTP 401')",
                      "the field again after sessionStorage was cleared")
            self.give_key(dt, self.b64)
            self.wait(dt, "document.getElementById('key-form').hidden && "
                          "document.getElementById('status').textContent === 'green'", "the base64 key taken")
            if self.key_state(dt)["stored"] != self.b64:
                raise Failed("the base64 key is kept as %s" % self.key_state(dt))
            log("the base64 form of the key is taken")
        finally:
            dt.close()
            bh.kill_group(self.browser)
            self.browser = None

    def fetch(self, path, key):
        """(status, body) of GET path over HTTPS, with Authorization: ApiKey key when key is given."""
        req = urllib.request.Request(self.base + path, headers={"Authorization": "ApiKey " + key} if key else {})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.tls) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def api(self, q, mode, k):
        status, text = self.fetch(self.url(q, mode, k)[len(self.base):], self.b64)
        if status != 200:
            raise Failed("GET /search %r with the key: HTTP %d: %s" % (q, status, text[:500]))
        return json.loads(text)

    def give_key(self, dt, text):
        """Types text into the API key field and clicks its button."""
        self.evaluate(dt, "(() => { const e = document.getElementById('api-key'); e.focus(); e.select(); })()")
        dt.call("Input.insertText", text=text)
        if self.evaluate(dt, "document.getElementById('api-key').value") != text:
            raise Failed("the API key field does not hold what was typed")
        self.click(dt, "#key-submit")

    def key_state(self, dt):
        return self.evaluate(dt, "({hidden: document.getElementById('key-form').hidden, "
                                 "err: document.getElementById('key-err').textContent, "
                                 "status: document.getElementById('status').textContent, "
                                 "stored: sessionStorage.getItem(%s), local: localStorage.length, "
                                 "cookie: document.cookie})" % json.dumps(KEY_ITEM))


if __name__ == "__main__":
    sys.exit(bh.main(ApiKeyPageTest, "api_key_page_test", __doc__, "api_key_page.png", port_offset=40))
