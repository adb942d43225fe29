#!/usr/bin/env python3
"""Checks of cairnd's HTTPS plane for the integration tests (stdlib only; the
certificate is self-signed, so verification is off as with curl -k).

  http_check.py metrics URL TOKEN
      GET URL/metrics, parse it with a strict parser of the Prometheus text
      format 0.0.4 (below) and, when python3-prometheus-client is installed,
      with its parser too; print every sample as `name{k="v",...} value` with
      labels sorted, one per line.
  http_check.py openapi URL TOKEN NAME=VALUE... [/PATH/{NAME}=VALUE...]
      GET URL/api/v1/openapi.json, check it is an OpenAPI 3 document, then GET
      every path that has a GET (path parameters from NAME=VALUE, or for one path
      from /PATH/{NAME}=VALUE) and check it
      answers 200 with a JSON object whose keys its response schema lists.
Exit 0 when every check holds; otherwise a one-line FAIL on stderr and exit 1.
"""
import json
import math
import re
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

CTX = ssl.create_default_context()
CTX.check_hostname = False
CTX.verify_mode = ssl.CERT_NONE


def fail(msg):
    sys.stderr.write("FAIL: %s\n" % msg)
    sys.exit(1)


def get(url, token):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, context=CTX, timeout=60) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


# ---------------------------------------------------------------- metrics

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s)(?:,%s)*\})? (\S+)$" % (NAME, LABEL, LABEL))
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(s, line):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", s):
        fail("metrics: bad value in %r" % line)
    return float(s)


def family_of(name, types):
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and types.get(base) == "histogram":
            return base
    return name


def strict_parse(text):
    """Samples as (name, labels dict, value). Enforces: the text ends with a
    newline; HELP then TYPE once per family, before its samples; a family's
    samples together; no duplicate series; counters named *_total and >= 0;
    histogram buckets cumulative, ending with le="+Inf" equal to _count."""
    if not text.endswith("\n"):
        fail("metrics: no final newline")
    types, helps, done, samples, seen = {}, set(), set(), [], set()
    current = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            m = re.fullmatch(r"# HELP (%s) (.+)" % NAME, line)
            if not m or m.group(1) in helps:
                fail("metrics: bad or repeated HELP %r" % line)
            helps.add(m.group(1))
            continue
        if line.startswith("# TYPE "):
            m = re.fullmatch(r"# TYPE (%s) (\S+)" % NAME, line)
            if not m or m.group(2) not in TYPES or m.group(1) in types:
                fail("metrics: bad or repeated TYPE %r" % line)
            if m.group(1) not in helps:
                fail("metrics: TYPE without HELP for %s" % m.group(1))
            types[m.group(1)] = m.group(2)
            if current:
                done.add(current)
            current = m.group(1)
            continue
        if not line or line.startswith("#"):
            fail("metrics: unexpected line %r" % line)
        m = SAMPLE.match(line)
        if not m:
            fail("metrics: not a sample line %r" % line)
        name = m.group(1)
        labels = dict(re.findall(LABEL, m.group(2) or ""))
        fam = family_of(name, types)
        if fam not in types:
            fail("metrics: sample before its TYPE: %r" % line)
        if fam != current or fam in done:
            fail("metrics: samples of %s not together" % fam)
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            fail("metrics: duplicate series %r" % line)
        seen.add(key)
        value = parse_value(m.group(len(m.groups())), line)
        if types[fam] == "counter" and (not name.endswith("_total") or value < 0):
            fail("metrics: counter %r must end in _total and be >= 0" % line)
        samples.append((name, labels, value))
    check_histograms(samples, types)
    return samples


def check_histograms(samples, types):
    series = {}
    for name, labels, value in samples:
        fam = family_of(name, types)
        if types.get(fam) != "histogram":
            continue
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault((fam, rest), {"buckets": [], "count": None, "sum": None})
        if name.endswith("_bucket"):
            if "le" not in labels:
                fail("metrics: bucket without le in %s" % fam)
            s["buckets"].append((parse_value(labels["le"], labels["le"]), value))
        elif name.endswith("_count"):
            s["count"] = value
        else:
            s["sum"] = value
    for (fam, rest), s in series.items():
        b = s["buckets"]
        if not b or b[-1][0] != math.inf or s["count"] is None or s["sum"] is None:
            fail("metrics: histogram %s%r lacks +Inf, _sum or _count" % (fam, rest))
        for (le1, v1), (le2, v2) in zip(b, b[1:]):
            if not le1 < le2 or v2 < v1:
                fail("metrics: histogram %s%r buckets not increasing" % (fam, rest))
        if b[-1][1] != s["count"]:
            fail("metrics: histogram %s%r +Inf bucket != _count" % (fam, rest))


def cmd_metrics(url, token):
    status, ctype, text = get(url + "/metrics", token)
    if status != 200:
        fail("GET /metrics: %d %s" % (status, text))
    if not ctype.startswith("text/plain") or "version=0.0.4" not in ctype:
        fail("/metrics Content-Type %r" % ctype)
    samples = strict_parse(text)
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        text_string_to_metric_families = None
    if text_string_to_metric_families:
        n = sum(len(f.samples) for f in text_string_to_metric_families(text))
        if n != len(samples):
            fail("prometheus_client parsed %d samples, the strict parser %d" % (n, len(samples)))
    for name, labels, value in samples:
        lab = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
        print("%s{%s} %s" % (name, lab, repr(value) if value != int(value) else int(value)))


# ---------------------------------------------------------------- OpenAPI

def resolve(doc, schema):
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def cmd_openapi(url, token, params):
    status, _, text = get(url + "/api/v1/openapi.json", None)
    if status != 200:
        fail("GET openapi.json without a token: %d" % status)
    doc = json.loads(text)
    if not doc.get("openapi", "").startswith("3.") or not doc.get("paths"):
        fail("not an OpenAPI 3 document with paths")
    base = url + doc["servers"][0]["url"]
    walked = 0
    for path, item in sorted(doc["paths"].items()):
        for method, op in item.items():
            if not op.get("operationId") or not op.get("responses"):
                fail("%s %s: no operationId or responses" % (method, path))
        if "get" not in item:
            continue
        real = path
        for p in re.findall(r"\{(\w+)\}", path):
            value = params.get(path, params.get(p))
            if value is None:
                fail("no value given for {%s} of %s" % (p, path))
            real = real.replace("{%s}" % p, urllib.parse.quote(value, safe="/@:"))
        status, _, text = get(base + real, token)
        ok = [c for c in item["get"]["responses"] if c.isdigit() and c.startswith("2")]
        if str(status) not in ok:
            fail("GET %s: %d %s (documented: %s)" % (real, status, text[:200], ok))
        body = json.loads(text)
        schema = resolve(doc, item["get"]["responses"][str(status)]["content"]["application/json"]["schema"])
        extra = set(body) - set(schema.get("properties", {})) - {"warning"}
        if schema.get("properties") is not None and extra:
            fail("GET %s: keys %s not in its documented schema" % (real, sorted(extra)))
        walked += 1
    print("walked %d GET paths of %d" % (walked, len(doc["paths"])))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "metrics":
        cmd_metrics(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "openapi":
        cmd_openapi(sys.argv[2], sys.argv[3], dict(a.split("=", 1) for a in sys.argv[4:]))
    else:
        fail("usage: http_check.py metrics|openapi URL TOKEN [NAME=VALUE...]")


if __name__ == "__main__":
    main()
