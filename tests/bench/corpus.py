"""The benchmark corpora: documentation-like HTML pages, generated deterministically.

Page i of a kind is a pure function of (SEED, GENERATOR_VERSION, kind, i): the same page
whatever the number of worker processes and whichever range is generated first, so a cached
corpus of N pages can be extended to M > N pages by generating the missing ones only, and a
QUICK corpus (the first 2,000 pages) is a prefix of the full one.

Every page is UTF-8 HTML5 that looks like a page of a documentation site: <head> with a <title>
(sometimes with non-ASCII text or an entity), a stylesheet link and a small inline style, a top
navigation bar, a sidebar table of contents, an article of sections with headings, paragraphs
with inline markup and non-ASCII text (German, French, Spanish, Russian, Greek, Japanese,
Chinese, typographic punctuation), tables, <pre><code> blocks with escaped code, lists, notes,
and a footer whose second <p> starts "Last updated on ". Two kinds differ in size only:

  docs   20-80 KB, log-normal around 40 KB (clipped): the main corpus
  big    0.5-2 MB, spread evenly, every page under 2,000,000 bytes (harvestd's default
         max_bytes is 2 MiB): single-page manuals, for memory on large pages

Layout under a corpus directory (KIND is docs or big, so that the URL path of a page is its
path under the directory):
  KIND/NN/page-IIIII.html   the pages, spread over 100 directories (NN = i % 100)
  index.tsv                 one line per page: i, URL path, size in bytes, expected title
                            (the <title> text after entity decoding and whitespace collapsing)
  manifest.json             {"version", "seed", "kind", "count"}; written last, so a corpus
                            without it (an interrupted generation) is regenerated

Command line (for a look at the pages):  python3 corpus.py DIR COUNT [docs|big]
"""

import html
import json
import math
import multiprocessing
import os
import random
import shutil
import sys

GENERATOR_VERSION = 1
CHUNK_TIMEOUT_S = 300
SEED = 20261129

MIN_SIZE = 20_000
MAX_SIZE = 80_000
MEDIAN_SIZE = 39_000
SIZE_SIGMA = 0.35

# A page ends with the section that reaches its target size: a few KB past it at most.
BIG_MIN_SIZE = 500_000
BIG_LIMIT = 2_000_000          # every big page is smaller (checked as it is written)
BIG_MAX_TARGET = BIG_LIMIT - 40_000

KINDS = ("docs", "big")

WORDS = """
the a an of to in and or for with on by from as is are be this that it its can may must should
will not only each every other when then than also into over under while which where after before
request response client server connection socket buffer queue worker thread pool timeout limit
option value default parameter argument return error exception handler callback event loop
stream reader writer parser token document element attribute node tree child parent sibling
configuration file directory path module package function method class object instance field
record header body status code version release feature support deprecated removed added changed
example usage note warning see below above following previous next section chapter reference
memory allocation cache index key lookup table entry list array string integer boolean number
""".split()

FOREIGN = """
Übersicht Größe Straße Schlüssel Verzeichnis Änderungen Einführung Beispiel Hinweis Fehlerbehandlung
élément déjà façon côté paramètre réseau fenêtre évènement intégré sécurité
configuración año señal conexión búsqueda módulo versión método
Документация пример сервер соединение запрос ответ ошибка настройка модуль функция
παράδειγμα διακομιστής σύνδεση ρύθμιση αρχείο
設定ファイル 例 接続 サーバー エラー処理 モジュール 関数 説明
文档 示例 服务器 连接 配置 错误 模块 函数
naïve café résumé coöperate Zürich Kraków Malmö São Paulo
""".split()

PUNCT = ["“", "”", "‘", "’", "—", "–", "…", "©", "→", "≤", "≥", "±", "×", "µs", "°C", "€", "½"]

TOPICS = ["Installation", "Configuration", "Quick start", "Tutorial", "API reference",
          "Streams", "Connections", "Timeouts", "Error handling", "Logging", "Security",
          "Deployment", "Performance", "Migration guide", "Changelog", "FAQ", "Glossary",
          "Übersicht", "Référence de l’API", "Guía de configuración", "Руководство",
          "設定ガイド", "入门指南", "Παράδειγμα χρήσης", "Install &amp; configure",
          "Sockets &amp; streams", "Tips &lt;and&gt; tricks"]

PROJECTS = ["Harvest", "Libfetch", "Quarry", "Lantern", "Sparrow", "Bricklayer", "Nimbus",
            "Ostrich", "Kestrel", "Marmot"]

CODE_LINES = [
    "for (size_t i = 0; i < n && buf[i] != '\\0'; i++) {",
    "    if (len > limit && (flags & F_STRICT) != 0)",
    "        return -EINVAL; /* too large */",
    "}",
    "static int on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);",
    "async def fetch(session, url: str) -> bytes:",
    "    async with session.get(url, timeout=10) as resp:",
    "        return await resp.read()",
    "if a < b and b > c: print(f\"{a} <-> {c}\")",
    "$ curl -sS 'https://example.org/api?q=1&page=2' | jq '.items[]'",
    "$ make -j2 && ./build/app --config /etc/app.conf >out.log 2>&1",
    "<div class=\"note\"><p>Hello &amp; welcome</p></div>",
    "const total = items.filter(x => x.size >= 1024).reduce((a, x) => a + x.size, 0);",
    "SELECT name, count(*) FROM pages WHERE size < 40000 GROUP BY name;",
    "# Größe in Bytes — \"naïve\" estimate",
    "let msg = \"Привет, мир\"; // greeting",
    "x = {'key': [1, 2, 3], \"other\": None}",
    "std::vector<std::string> parts = split(line, ',');",
]


def _sentence(rng, n_words):
    words = []
    for _ in range(n_words):
        r = rng.random()
        if r < 0.08:
            words.append(rng.choice(FOREIGN))
        elif r < 0.11:
            words.append(rng.choice(PUNCT))
        else:
            words.append(rng.choice(WORDS))
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice([".", ".", ".", "?", "!", ":", " …"])


def _inline(rng, text):
    """Wrap a few words of `text` in inline elements."""
    words = text.split(" ")
    for _ in range(rng.randint(0, 4)):
        k = rng.randrange(len(words))
        w = words[k]
        tag = rng.random()
        if tag < 0.35:
            words[k] = "<code>" + html.escape(w, quote=False) + "</code>"
        elif tag < 0.55:
            words[k] = "<em>" + w + "</em>"
        elif tag < 0.7:
            words[k] = "<strong>" + w + "</strong>"
        else:
            words[k] = '<a href="../%02d/page-%05d.html#%s" class="reference internal">%s</a>' % (
                rng.randrange(100), rng.randrange(100_000), rng.choice(WORDS), w)
    return " ".join(words)


def _paragraph(rng):
    sentences = [_inline(rng, _sentence(rng, rng.randint(6, 22))) for _ in range(rng.randint(2, 7))]
    return "<p>" + " ".join(sentences) + "</p>\n"


def _code_block(rng):
    lang = rng.choice(["c", "python", "shell", "javascript", "sql", "text"])
    lines = [html.escape(rng.choice(CODE_LINES), quote=False) for _ in range(rng.randint(4, 28))]
    return ('<div class="highlight-%s notranslate"><pre><code class="language-%s">%s\n'
            '</code></pre></div>\n' % (lang, lang, "\n".join(lines)))


def _table(rng):
    cols = rng.randint(2, 5)
    rows = rng.randint(3, 14)
    head = "".join("<th>%s</th>" % rng.choice(WORDS + FOREIGN).capitalize() for _ in range(cols))
    body = []
    for _ in range(rows):
        cells = []
        for c in range(cols):
            if c == 0:
                cells.append("<td><code>%s_%s</code></td>" % (rng.choice(WORDS), rng.choice(WORDS)))
            elif rng.random() < 0.3:
                cells.append("<td>%d</td>" % rng.randrange(100_000))
            else:
                cells.append("<td>%s</td>" % _inline(rng, _sentence(rng, rng.randint(2, 9))))
        body.append("<tr>" + "".join(cells) + "</tr>")
    return ('<table class="docutils align-default">\n<thead><tr>%s</tr></thead>\n<tbody>\n%s\n'
            '</tbody>\n</table>\n' % (head, "\n".join(body)))


def _list(rng):
    tag = rng.choice(["ul", "ol"])
    items = "".join("<li><p>%s</p></li>\n" % _inline(rng, _sentence(rng, rng.randint(4, 14)))
                    for _ in range(rng.randint(2, 8)))
    return "<%s class=\"simple\">\n%s</%s>\n" % (tag, items, tag)


def _note(rng):
    kind = rng.choice(["note", "warning", "seealso", "versionchanged"])
    return ('<div class="admonition %s">\n<p class="admonition-title">%s</p>\n%s</div>\n'
            % (kind, kind.capitalize(), _paragraph(rng)))


class _Pools:
    """Blocks drawn once per process from SEED; pages combine them."""

    def __init__(self):
        rng = random.Random("%d-pools-v%d" % (SEED, GENERATOR_VERSION))
        self.paragraphs = [_paragraph(rng) for _ in range(3000)]
        self.codes = [_code_block(rng) for _ in range(600)]
        self.tables = [_table(rng) for _ in range(500)]
        self.lists = [_list(rng) for _ in range(500)]
        self.notes = [_note(rng) for _ in range(300)]


_POOLS = None


def _pools():
    global _POOLS
    if _POOLS is None:
        _POOLS = _Pools()
    return _POOLS


def page_path(i, kind="docs"):
    return "/%s/%02d/page-%05d.html" % (kind, i % 100, i)


def _target_size(rng, kind):
    if kind == "big":
        return rng.randint(BIG_MIN_SIZE, BIG_MAX_TARGET)
    size = int(MEDIAN_SIZE * math.exp(rng.gauss(0.0, SIZE_SIGMA)))
    return max(MIN_SIZE, min(MAX_SIZE - 4_000, size))


def make_page(i, kind="docs"):
    """Page i of `kind`: (URL path, HTML bytes, expected title)."""
    pools = _pools()
    # The docs seed is the one of the first corpus, so that its pages stay as they were.
    rng = random.Random("%d-%s-v%d-%d" % (SEED, "page" if kind == "docs" else kind,
                                          GENERATOR_VERSION, i))
    project = rng.choice(PROJECTS)
    version = "%d.%d" % (rng.randint(1, 4), rng.randint(0, 12))
    topic = rng.choice(TOPICS)
    module = "%s.%s" % (rng.choice(WORDS), rng.choice(WORDS))
    raw_title = "%s: %s — %s %s documentation (p.%d)" % (topic, module, project, version, i)
    title = " ".join(html.unescape(raw_title).split())
    target = _target_size(rng, kind)

    out = []
    out.append('<!DOCTYPE html>\n<html lang="en" data-content_root="../../">\n<head>\n'
               '<meta charset="utf-8">\n'
               '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
               '<title>%s</title>\n'
               '<link rel="stylesheet" type="text/css" href="../../_static/pygments.css?v=%08x">\n'
               '<link rel="stylesheet" type="text/css" href="../../_static/theme.css?v=%08x">\n'
               '<link rel="index" title="Index" href="../../genindex.html">\n'
               '<style>.sidebar{float:left;width:18em}.body{margin-left:19em}'
               'pre{background:#f8f8f8;padding:.5em}</style>\n'
               '<script>var DOCS_VERSION = "%s"; if (window.x < 1 && true) {}</script>\n'
               '</head>\n<body>\n' % (raw_title, rng.getrandbits(32), rng.getrandbits(32), version))
    # Top navigation.
    out.append('<header class="top"><nav class="related" aria-label="Related">\n<ul>\n')
    for k in range(rng.randint(8, 16)):
        out.append('<li class="nav-item nav-item-%d"><a href="../%02d/page-%05d.html" '
                   'title="%s" accesskey="%s">%s</a> |</li>\n'
                   % (k, rng.randrange(100), rng.randrange(100_000), rng.choice(TOPICS),
                      chr(65 + k), rng.choice(TOPICS)))
    out.append('</ul>\n</nav>\n<form class="search" action="../../search.html" method="get">'
               '<input type="text" name="q" aria-labelledby="searchlabel" autocomplete="off">'
               '<input type="submit" value="Go"></form>\n</header>\n')
    # Sidebar table of contents.
    out.append('<div class="sphinxsidebar" role="navigation"><div class="sphinxsidebarwrapper">\n'
               '<h3>Table of contents</h3>\n<ul>\n')
    for _ in range(rng.randint(15, 45)):
        out.append('<li class="toctree-l1"><a class="reference internal" '
                   'href="../%02d/page-%05d.html">%s — %s</a></li>\n'
                   % (rng.randrange(100), rng.randrange(100_000), rng.choice(TOPICS),
                      rng.choice(WORDS + FOREIGN)))
    out.append('</ul>\n</div></div>\n<div class="document"><div class="body" role="main">\n'
               '<section id="page-%d">\n<h1>%s<a class="headerlink" href="#page-%d" '
               'title="Link to this heading">¶</a></h1>\n' % (i, html.escape(title), i))

    footer = ('</section>\n</div></div>\n<footer class="footer"><div role="contentinfo">'
              '<p>© Copyright 2009–2026, the %s authors — Größe %d B.</p>'
              '<p>Last updated on %d %s 2026. Built with a static site generator.</p>'
              '</div></footer>\n</body>\n</html>\n'
              % (project, target, rng.randint(1, 28), rng.choice(["Jan", "Feb", "Mär", "Apr"])))

    size = sum(len(s.encode("utf-8")) for s in out) + len(footer.encode("utf-8"))
    sec = 0
    while size < target:
        sec += 1
        parts = ['<section id="s%d-%s">\n<h2>%d. %s<a class="headerlink" href="#s%d">¶</a></h2>\n'
                 % (sec, rng.choice(WORDS), sec,
                    html.escape(_sentence(rng, rng.randint(2, 5)), quote=False), sec)]
        size += len(parts[0].encode("utf-8"))
        for _ in range(rng.randint(2, 6)):
            r = rng.random()
            if r < 0.5:
                block = rng.choice(pools.paragraphs)
            elif r < 0.7:
                block = rng.choice(pools.codes)
            elif r < 0.82:
                block = rng.choice(pools.tables)
            elif r < 0.93:
                block = rng.choice(pools.lists)
            else:
                block = rng.choice(pools.notes)
            parts.append(block)
            size += len(block.encode("utf-8"))
            if size >= target:
                break
        parts.append("</section>\n")
        size += len(parts[-1])
        out.extend(parts)
    out.append(footer)
    return page_path(i, kind), "".join(out).encode("utf-8"), title


def _generate_range(args):
    root, kind, lo, hi = args
    rows = []
    for i in range(lo, hi):
        path, data, title = make_page(i, kind)
        if kind == "big" and len(data) >= BIG_LIMIT:
            raise RuntimeError("big page %d has %d bytes, not under %d" % (i, len(data), BIG_LIMIT))
        full = os.path.join(root, path.lstrip("/"))
        with open(full, "wb") as f:
            f.write(data)
        rows.append("%d\t%s\t%d\t%s\n" % (i, path, len(data), title))
    return rows


def _read_manifest(root):
    try:
        with open(os.path.join(root, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ensure(root, count, jobs=None, log=None, kind="docs"):
    """Make sure `root` holds pages 0..count-1 of `kind` and of the current generator version
    (generating only what is missing) and return the first `count` rows of the index as a list
    of (path, size, title). `log` (a print-like function) hears about generation."""
    if kind not in KINDS:
        raise ValueError("unknown corpus kind %r" % kind)
    manifest = _read_manifest(root)
    have = 0
    # Manifests older than the big pages name no kind: they are docs corpora.
    if manifest is not None and manifest.get("version") == GENERATOR_VERSION \
            and manifest.get("seed") == SEED and manifest.get("kind", "docs") == kind:
        have = int(manifest.get("count", 0))
    elif os.path.exists(root):
        shutil.rmtree(root)

    if have < count:
        if log:
            log("generating %s corpus pages %d..%d in %s (generator v%d)"
                % (kind, have, count - 1, root, GENERATOR_VERSION))
        for b in range(100):
            os.makedirs(os.path.join(root, kind, "%02d" % b), exist_ok=True)
        # The index is rewritten to exactly the pages generated so far before new ones are added.
        index_path = os.path.join(root, "index.tsv")
        rows = []
        if have:
            with open(index_path, encoding="utf-8") as f:
                rows = f.readlines()[:have]
        jobs = jobs or os.cpu_count() or 1
        # Chunks of about 10 MB (25 MB for big pages), enough of them to keep every job busy.
        step = 20 if kind == "big" else 250
        chunks = [(root, kind, lo, min(lo + step, count)) for lo in range(have, count, step)]
        if jobs > 1 and len(chunks) > 1:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                # A worker that dies leaves its task unanswered for ever (imap would wait for
                # it): a generous deadline per chunk turns that into an error.
                parts = [pool.apply_async(_generate_range, (c,)) for c in chunks]
                for part in parts:
                    try:
                        rows.extend(part.get(timeout=CHUNK_TIMEOUT_S))
                    except multiprocessing.TimeoutError:
                        raise RuntimeError("corpus generation: a chunk took over %d s (a "
                                           "worker died?)" % CHUNK_TIMEOUT_S) from None
        else:
            for c in chunks:
                rows.extend(_generate_range(c))
        tmp = index_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(rows)
        os.replace(tmp, index_path)
        tmp = os.path.join(root, "manifest.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"version": GENERATOR_VERSION, "seed": SEED, "kind": kind, "count": count},
                      f)
        os.replace(tmp, os.path.join(root, "manifest.json"))

    result = []
    with open(os.path.join(root, "index.tsv"), encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= count:
                break
            _, path, size, title = line.rstrip("\n").split("\t", 3)
            result.append((path, int(size), title))
    if len(result) != count:
        raise RuntimeError("corpus index in %s has %d pages, expected %d" % (root, len(result), count))
    return result


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in KINDS):
        sys.exit("usage: corpus.py DIR COUNT [docs|big]")
    rows = ensure(sys.argv[1], int(sys.argv[2]), log=print,
                  kind=sys.argv[3] if len(sys.argv) == 4 else "docs")
    sizes = sorted(r[1] for r in rows)
    print("pages=%d bytes=%d min=%d median=%d max=%d"
          % (len(rows), sum(sizes), sizes[0], sizes[len(sizes) // 2], sizes[-1]))
