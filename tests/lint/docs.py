#!/usr/bin/python3
"""docs.py: the documentation against the code, so that neither drifts from the other.

    python3 tests/lint/docs.py --bin build/harvestd --man build/man
                                         check (run by `make lint`); exit 1 on a problem
    python3 tests/lint/docs.py --contents  print the contents list README.md carries

What is checked, each problem one line `file:line: message`:
  - every directive of the table in src/config.c is in conf/harvestd.conf (a `name = value`
    line, commented or not) and in README.md (`name`, or its option --name); every directive
    line of conf/harvestd.conf names a directive;
  - every option that `harvestd --help` and each command's --help list is in README.md (a
    directive's option counts as there when the directive is: README says that every
    directive is an option);
  - every key a record may carry (src/record.c) is in README.md's table of keys;
  - the manual pages (`make man`) hold every option and directive, and groff reads them
    without a warning;
  - README.md's contents list links every ## and ### heading, in order, and every link in it
    leads to a heading (anchors as GitHub makes them).
"""

import argparse
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG_C = ROOT / "src" / "config.c"
CONF = ROOT / "conf" / "harvestd.conf"
RECORD_C = ROOT / "src" / "record.c"
README = ROOT / "README.md"
CONTENTS_BEGIN = "<!-- contents: tests/lint/docs.py --contents -->"
CONTENTS_END = "<!-- /contents -->"
COMMANDS = ("enqueue", "status", "merge", "state")

# Keys of the file's top that are no directive: each is read by a setter of its own (config.c).
KEYS_BESIDES = {"header"}
DIRECTIVE_ROW = re.compile(r'^\s*\{"([a-z0-9_]+)",\s*T_[A-Z0-9_]+,')
CONF_LINE = re.compile(r"^#?\s*([a-z][a-z0-9_]*)\s*=(\s|$)")
# A key of a record, as the writer adds it to the object.
RECORD_KEY = re.compile(r'(?:hv_record_add_\w+|cJSON_Add\w*ToObject)\(obj, "([a-z_]+)"')
# An option as written in --help: --name or -x, not inside a word or a longer option.
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-z]{1,2})(?![\w-])")


def rel(path):
    return path.relative_to(ROOT).as_posix() if path.is_absolute() else str(path)


def directives():
    """[(name, line)] of the directive table, in order."""
    rows, inside = [], False
    for lineno, line in enumerate(CONFIG_C.read_text().splitlines(), 1):
        if line.startswith("static const directive_t directives[]"):
            inside = True
        elif inside and line.startswith("};"):
            break
        elif inside:
            m = DIRECTIVE_ROW.match(line)
            if m:
                rows.append((m.group(1), lineno))
    return rows


def option_of(directive):
    return "--" + directive.replace("_", "-")


def mentions(text, word):
    """Whether `word` (a directive or an option) stands in `text` as a word of its own."""
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def check_conf(rows):
    problems = []
    names = {n for n, _ in rows}
    found = set()
    for lineno, line in enumerate(CONF.read_text().splitlines(), 1):
        if re.match(r'^#?\s*\[[a-z]+\s+"', line):
            break  # the sections' keys are no directives
        m = CONF_LINE.match(line)
        if m is None or m.group(1) in KEYS_BESIDES:
            continue
        if m.group(1) in names:
            found.add(m.group(1))
        else:
            problems.append(f"{rel(CONF)}:{lineno}: '{m.group(1)}' is no directive "
                            f"(not in the table of {rel(CONFIG_C)})")
    for name, lineno in rows:
        if name not in found:
            problems.append(f"{rel(CONFIG_C)}:{lineno}: directive {name} is not in "
                            f"{rel(CONF)} (a '# {name} = DEFAULT' line under its paragraph)")
    return problems


def check_readme_directives(rows, readme):
    return [f"{rel(CONFIG_C)}:{lineno}: directive {name} appears nowhere in README.md "
            f"(neither `{name}` nor {option_of(name)})"
            for name, lineno in rows
            if not mentions(readme, name) and not mentions(readme, option_of(name))]


def check_record_keys(readme):
    """Every key the record writer writes is a row of README's table of keys ("## Output")."""
    lines = readme.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == "## Output"), None)
    if start is None:
        return ["README.md:1: no '## Output' section with the table of record keys"]
    documented = set()
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        cell = line.split("|")[1] if line.startswith("|") else ""
        documented.update(re.findall(r"`([a-z_]+)`", cell))
    problems = []
    for lineno, line in enumerate(RECORD_C.read_text().splitlines(), 1):
        for key in RECORD_KEY.findall(line):
            if key not in documented:
                problems.append(f"{rel(RECORD_C)}:{lineno}: record key '{key}' is not in "
                                f"README.md's table of keys (README.md:{start + 1})")
    return problems


def run_help(binary, *args):
    r = subprocess.run([str(binary), *args, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"lint: {binary} {' '.join(args)} --help exited {r.returncode}: "
                         f"{r.stderr.strip()}")
    return r.stdout


def where_option(option, sources):
    """file:line of the table row that spells `option`, for the message."""
    name = option.lstrip("-")
    key = ".letter" if not option.startswith("--") else ".name"
    for path in sources:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if f'{key} = "{name}"' in line:
                return f"{rel(path)}:{lineno}"
    return "README.md:1"


def listed_options(text):
    """The options of a --help text: those on the lines of its option list (a line that
    starts with "  -"), its own and those its meaning names."""
    return {o for line in text.splitlines() if line.startswith("  -")
            for o in OPTION.findall(line)}


def help_options(binary):
    """{command: set of options its --help lists}; "" for the daemon's own."""
    found = {"": listed_options(run_help(binary))}
    for cmd in COMMANDS:
        found[cmd] = listed_options(run_help(binary, cmd))
    return found


def check_readme_options(options, rows, readme):
    """The options that are no directive's (check_readme_directives has those)."""
    problems = []
    directive_options = {option_of(n) for n, _ in rows}
    files = {"": "main.c", "enqueue": "cmd/streamcmd.c", "status": "cmd/streamcmd.c",
             "merge": "cmd/merge.c", "state": "cmd/state.c"}
    for cmd, opts in options.items():
        sources = [ROOT / "src" / files.get(cmd, "main.c")]
        for opt in sorted(opts):
            if mentions(readme, opt) or (cmd == "" and opt in directive_options):
                continue
            what = f"harvestd {cmd} --help".replace("  ", " ")
            problems.append(f"{where_option(opt, sources)}: option {opt} ({what}) appears "
                            f"nowhere in README.md")
    return problems


def roff_text(path):
    """A manual page's words as they print: escapes and fonts dropped, minus as '-'."""
    text = path.read_text()
    text = text.replace("\\-", "-").replace("\\&", "")
    return re.sub(r"\\f[BIRP]", "", text)


def check_man(man_dir, options, rows):
    problems = []
    page1, page5 = man_dir / "harvestd.1", man_dir / "harvestd.conf.5"
    for page in (page1, page5):
        if not page.is_file():
            return [f"{rel(page)}:1: no such manual page (make man writes it)"]
    text1, text5 = roff_text(page1), roff_text(page5)
    for opts in options.values():
        for opt in sorted(opts):
            if not mentions(text1, opt):
                problems.append(f"{rel(page1)}:1: option {opt} is not in the manual page")
    for name, lineno in rows:
        if not mentions(text1, option_of(name)):
            problems.append(f"{rel(CONFIG_C)}:{lineno}: directive {name} is not in "
                            f"{rel(page1)} as {option_of(name)}")
        if not mentions(text5, name):
            problems.append(f"{rel(CONFIG_C)}:{lineno}: directive {name} is not in {rel(page5)}")
    groff = shutil.which("groff")
    if groff is None:
        return problems + ["lint: groff not found; 'make deps' installs it (Debian package "
                           "groff-base)"]
    for page in (page1, page5):
        r = subprocess.run([groff, "-man", "-Tutf8", "-wall", "-z", str(page)],
                           capture_output=True, text=True)
        for line in r.stderr.splitlines():
            problems.append(f"{rel(page)}: groff: {line}")
        if r.returncode != 0 and not r.stderr:
            problems.append(f"{rel(page)}:1: groff exited {r.returncode}")
    return problems


# ---- README's contents list ----

def github_anchor(title):
    """The anchor GitHub gives a heading: its text lower-cased, without punctuation (but - and
    _), spaces as dashes."""
    text = re.sub(r"`([^`]*)`", r"\1", title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip().lower()
    kept = [c for c in text
            if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"]
    return "".join(kept).replace(" ", "-")


def headings(lines):
    """[(level, title, anchor, line)] of the ## and ### headings outside code blocks."""
    out, fence, seen = [], None, {}
    for lineno, line in enumerate(lines, 1):
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            mark = m.group(1)[0] * 3
            fence = None if fence == mark else (fence or mark)
            continue
        if fence:
            continue
        m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m is None:
            continue
        anchor = github_anchor(m.group(2))
        n = seen.get(anchor, 0)
        seen[anchor] = n + 1
        if n:
            anchor = f"{anchor}-{n}"
        if len(m.group(1)) in (2, 3):
            out.append((len(m.group(1)), m.group(2), anchor, lineno))
    return out


def contents_markdown(heads):
    return "\n".join(f"{'  ' * (level - 2)}- [{title}](#{anchor})"
                     for level, title, anchor, _ in heads)


def check_contents(text):
    lines = text.splitlines()
    begin = next((i for i, l in enumerate(lines) if l.strip() == CONTENTS_BEGIN), None)
    end = next((i for i, l in enumerate(lines) if l.strip() == CONTENTS_END), None)
    if begin is None or end is None or end < begin:
        return [f"README.md:1: no contents list between '{CONTENTS_BEGIN}' and "
                f"'{CONTENTS_END}'"]
    heads = headings(lines)
    anchors = {a for _, _, a, _ in heads}
    problems, linked = [], set()
    for i in range(begin + 1, end):
        for m in re.finditer(r"\]\(#([^)]*)\)", lines[i]):
            linked.add(m.group(1))
            if m.group(1) not in anchors:
                problems.append(f"README.md:{i + 1}: contents link #{m.group(1)} leads to no "
                                f"heading")
    for level, title, anchor, lineno in heads:
        if anchor not in linked:
            problems.append(f"README.md:{lineno}: heading '{'#' * level} {title}' is not in "
                            f"the contents list (README.md:{begin + 1})")
    copy = "\n".join(lines[begin + 1:end]).strip()
    if not problems and copy != contents_markdown(heads):
        problems.append(f"README.md:{begin + 1}: the contents list differs from the headings in "
                        f"order or wording (python3 tests/lint/docs.py --contents prints it)")
    return problems


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--bin", type=Path, help="the harvestd binary whose --help is checked")
    ap.add_argument("--man", type=Path, help="the directory of the generated manual pages")
    ap.add_argument("--contents", action="store_true", help="print README's contents list")
    args = ap.parse_args(argv[1:])
    readme = README.read_text()
    if args.contents:
        print(contents_markdown(headings(readme.splitlines())))
        return 0
    if args.bin is None or args.man is None:
        ap.error("--bin and --man are needed to check")
    rows = directives()
    problems = []
    if len(rows) < 30:
        problems.append(f"{rel(CONFIG_C)}:1: found {len(rows)} directives: is the table still "
                        f"`static const directive_t directives[]`?")
    options = help_options(args.bin)
    problems += check_conf(rows)
    problems += check_readme_directives(rows, readme)
    problems += check_readme_options(options, rows, readme)
    problems += check_record_keys(readme)
    problems += check_man(args.man, options, rows)
    problems += check_contents(readme)
    for p in problems:
        print(p)
    sys.stdout.flush()
    if problems:
        print(f"lint: {len(problems)} place(s) where the documentation and the code disagree",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
