#!/usr/bin/python3
"""layers.py: harvestd's include direction, checked against tests/lint/layers.txt.

    python3 tests/lint/layers.py             check (run by `make lint`); exit 1 on a violation
    python3 tests/lint/layers.py --markdown  print the table README.md carries

Every file of src/ (.c and .h, subdirectories too) and include/harvestd/ belongs to a module:
src/**/NAME.c, include/harvestd/NAME.h and a private src/**/NAME_int.h all to NAME. Each
#include of a harvestd header (or of a private header next to the file) is checked: the
included module's layer must not be above the including module's, and two modules of one
layer must not include each other. Each problem is one line, `file:line: message`.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TABLE = Path(__file__).resolve().with_name("layers.txt")
README = ROOT / "README.md"
README_BEGIN = "<!-- layers: tests/lint/layers.py --markdown -->"
README_END = "<!-- /layers -->"

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class Table:
    def __init__(self, path):
        self.path = path
        self.layers = []  # (name, [module], description), lowest first
        self.rank = {}  # layer name -> index
        self.module_layer = {}  # module -> layer name
        self.dir_layer = {}  # "cmd" -> layer name: every module of src/cmd/
        self.known = []  # [file, module, line number in the table, used]
        self.errors = []
        self._read()

    def _error(self, lineno, msg):
        self.errors.append(f"{self._rel()}:{lineno}: {msg}")

    def _rel(self):
        return self.path.relative_to(ROOT).as_posix()

    def _read(self):
        for lineno, raw in enumerate(self.path.read_text().splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            kind, _, rest = line.partition(" ")
            if kind == "layer":
                self._layer(lineno, rest)
            elif kind == "known":
                words = rest.split()
                if len(words) < 3:
                    self._error(lineno, "a known row is `known FILE MODULE why`")
                    continue
                self.known.append([words[0], words[1], lineno, False])
            else:
                self._error(lineno, f"unknown row kind '{kind}' (layer or known)")

    def _layer(self, lineno, rest):
        spec, _, what = rest.partition("|")
        words = spec.split()
        if len(words) < 2:
            self._error(lineno, "a layer row is `layer NAME MODULE... | what they are`")
            return
        name, modules = words[0], words[1:]
        if name in self.rank:
            self._error(lineno, f"layer {name} appears twice")
            return
        self.rank[name] = len(self.layers)
        self.layers.append((name, modules, what.strip()))
        for m in modules:
            if m.endswith("/"):
                self.dir_layer[m.rstrip("/")] = name
            elif m in self.module_layer:
                self._error(lineno, f"{m} is placed twice ({self.module_layer[m]} and {name})")
            else:
                self.module_layer[m] = name

    def layer_of(self, module, cmd_modules):
        if module in self.module_layer:
            return self.module_layer[module]
        if module in cmd_modules and "cmd" in self.dir_layer:
            return self.dir_layer["cmd"]
        return None

    def markdown(self):
        out = ["| layer | modules | what they are |", "|---|---|---|"]
        for name, modules, what in self.layers:
            mods = ", ".join(f"`{m}`" for m in modules)
            out.append(f"| {name} | {mods} | {what} |")
        return "\n".join(out)


def module_of(path):
    """The module a file of src/ or include/harvestd/ belongs to."""
    stem = path.stem
    if path.suffix == ".h" and stem.endswith("_int"):
        stem = stem[: -len("_int")]
    return stem


def sources():
    files = sorted(ROOT.glob("src/**/*.c")) + sorted(ROOT.glob("src/**/*.h"))
    files += sorted(ROOT.glob("include/harvestd/*.h"))
    return files


def included_module(path, quote, name):
    """The module an #include names, or None for a header that is not harvestd's."""
    if name.startswith("harvestd/") and name.endswith(".h"):
        return module_of(Path(name))
    if quote == '"' and (path.parent / name).is_file():
        return module_of(path.parent / name)
    return None


def check(table):
    problems = list(table.errors)
    cmd_modules = {module_of(p) for p in (ROOT / "src" / "cmd").glob("*.[ch]")}
    edges = {}  # (from module, to module) -> "file:line", the first include of that pair
    for path in sources():
        rel = path.relative_to(ROOT).as_posix()
        mod = module_of(path)
        layer = table.layer_of(mod, cmd_modules)
        if layer is None:
            problems.append(f"{rel}:1: module {mod} is in no layer (add it to "
                            f"{table._rel()})")
            continue
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if m is None:
                continue
            dep = included_module(path, m.group(1), m.group(2))
            if dep is None or dep == mod:
                continue
            where = f"{rel}:{lineno}"
            dep_layer = table.layer_of(dep, cmd_modules)
            if dep_layer is None:
                problems.append(f"{where}: {mod} ({layer}) includes {dep}, which is in no layer")
                continue
            known = next((k for k in table.known if k[0] == rel and k[1] == dep), None)
            if known is not None:
                known[3] = True
                continue
            if table.rank[dep_layer] > table.rank[layer]:
                problems.append(f"{where}: {mod} ({layer}) includes {dep} ({dep_layer})")
            elif dep_layer == layer:
                edges.setdefault((mod, dep), where)
    for (a, b), where in sorted(edges.items(), key=lambda e: e[1]):
        back = edges.get((b, a))
        if back is not None and a < b:
            layer = table.layer_of(a, cmd_modules)
            problems.append(f"{where}: {a} ({layer}) includes {b} ({layer}), which includes "
                            f"{a} at {back}")
    for file, dep, lineno, used in table.known:
        if not used:
            problems.append(f"{table._rel()}:{lineno}: known {file} {dep}: no such include "
                            f"any more, remove the row")
    problems += check_readme(table)
    return problems


def check_readme(table):
    text = README.read_text()
    begin, end = text.find(README_BEGIN), text.find(README_END)
    if begin < 0 or end < begin:
        return [f"README.md:1: no layer table between '{README_BEGIN}' and '{README_END}'"]
    copy = text[begin + len(README_BEGIN) : end].strip()
    if copy != table.markdown():
        lineno = text.count("\n", 0, begin) + 1
        return [f"README.md:{lineno}: the layer table differs from {table._rel()} "
                f"(python3 tests/lint/layers.py --markdown prints it)"]
    return []


def main(argv):
    table = Table(TABLE)
    if argv[1:] == ["--markdown"]:
        print(table.markdown())
        return 0 if not table.errors else 1
    if argv[1:]:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems = check(table)
    for p in problems:
        print(p)
    sys.stdout.flush()
    if problems:
        print(f"lint: {len(problems)} include problem(s) against the layers ({table._rel()})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
