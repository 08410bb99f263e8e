#!/usr/bin/env python3
"""Write lazyblk's man pages from the binary's own --help texts, so they cannot drift.

Usage: scripts/help2man.py LAZYBLK OUTDIR

Runs `LAZYBLK --help` (lazyblk.1; its "subcommands:" list names the other pages) and
`LAZYBLK CMD --help` for each subcommand (lazyblk-CMD.1), and turns each text into roff:
NAME, SYNOPSIS (the "usage:" lines), DESCRIPTION (the paragraphs and lists before
"options:"), OPTIONS, then the paragraphs after the options (NOTES, or EXIT STATUS when
one starts with "Exit status:"), EXIT STATUS and SEE ALSO.

The --help texts follow one layout, which this reads:
- "usage: lazyblk CMD ..." and its continuation lines, "       lazyblk CMD ..." for
  another form, up to a blank line;
- paragraphs of text at column 0, maybe with indented example lines (kept as they are);
- a heading ("options:", "SRC:", "subcommands:") over a list;
- lists: an item at an indent below 8 ("  -s, --store DIR   text", "verify  text"), its
  text after two spaces (or at the list's text column), continued on lines indented 8 or
  more, or as far as the item's text.
"""
import os
import re
import subprocess
import sys

HEADING = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*( [A-Za-z0-9_-]+){0,2}:$")
ITEM_GAP = re.compile(r"^(\s*)(\S(?:.*?\S)?)\s{2,}(\S.*)$")
DEF_LINE = re.compile(r"^\S+ {2,}\S")
ITEM_MAX_INDENT = 8


def esc(text):
    """roff-escape a piece of text: backslashes and hyphens (ASCII minus, never a dash)."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def text_line(text):
    """One roff text line: escaped, never read as a request."""
    line = esc(text)
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def run_help(lazyblk, *args):
    out = subprocess.run([lazyblk, *args, "--help"], check=True, capture_output=True,
                         text=True).stdout
    return out.rstrip("\n").split("\n")


# ---- parsing


def parse_synopsis(lines):
    """The "usage:" block: a list of forms (strings), and the lines after it."""
    assert lines and lines[0].startswith("usage: "), "no usage: line"
    forms = [lines[0][len("usage: "):].strip()]
    i = 1
    while i < len(lines) and lines[i].strip():
        s = " ".join(lines[i].split())
        if s.startswith("lazyblk "):
            forms.append(s)
        else:
            forms[-1] += " " + s
        i += 1
    return forms, lines[i:]


def split_blocks(lines):
    """Blocks: ("section", heading, lines) or ("para", None, lines)."""
    blocks = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if HEADING.match(line) and i + 1 < len(lines) and indent_of(lines[i + 1]) > 0:
            j = i + 1
            while j < len(lines) and lines[j].strip() and indent_of(lines[j]) > 0:
                j += 1
            blocks.append(("section", line[:-1], lines[i + 1:j]))
        else:
            j = i
            while j < len(lines) and lines[j].strip() and not (
                    j > i and HEADING.match(lines[j]) and j + 1 < len(lines)
                    and indent_of(lines[j + 1]) > 0):
                j += 1
            blocks.append(("para", None, lines[i:j]))
        i = j
    return blocks


def is_list(lines):
    """A paragraph that is a definition list: "verify  text" or "  TAG   text" lines."""
    if DEF_LINE.match(lines[0]):
        return True
    return indent_of(lines[0]) > 0 and bool(ITEM_GAP.match(lines[0])) and all(
        indent_of(l) > 0 for l in lines)


def text_column(lines):
    """The list's text column: where its continuation lines start (the most common)."""
    cols = {}
    for l in lines:
        if indent_of(l) >= ITEM_MAX_INDENT:
            cols[indent_of(l)] = cols.get(indent_of(l), 0) + 1
    return max(cols, key=cols.get) if cols else None


def parse_items(lines):
    """[(tag, [text lines])] of a list."""
    col = text_column(lines)
    items = []
    item_col = None  # where the text of the item being read starts
    for l in lines:
        if items and (indent_of(l) >= ITEM_MAX_INDENT or
                      (item_col and indent_of(l) >= item_col)):
            items[-1][1].append(l.strip())
            continue
        m = ITEM_GAP.match(l)
        if m:
            items.append((m.group(2), [m.group(3)]))
            item_col = m.start(3)
        elif col and len(l) > col and l[col - 1] == " " and l[col] != " ":
            items.append((l[:col].strip(), [l[col:].strip()]))
            item_col = col
        else:
            items.append((l.strip(), []))
            item_col = None
    return items


# ---- writing


def fmt_tag(tag):
    """An item's tag: options bold with their arguments in italics; other tags bold."""
    if not tag.startswith("-"):
        return "\\fB" + esc(tag) + "\\fR"
    parts = []
    for alt in tag.split(", "):
        words = alt.split(" ")
        s = "\\fB" + esc(words[0]) + "\\fR"
        if len(words) > 1:
            s += " \\fI" + esc(" ".join(words[1:])) + "\\fR"
        parts.append(s)
    return ", ".join(parts)


def fmt_form(form, cmd):
    """A synopsis form: the command words bold ("lazyblk cas verify"), the rest roman."""
    words = form.split(" ")
    n = 1
    if cmd and len(words) > 1 and words[1] == cmd:
        n = 2
    if len(words) > n and re.match(r"^[a-z]+$", words[n]):
        n += 1
    out = "\\fB" + esc(" ".join(words[:n])) + "\\fR"
    if len(words) > n:
        out += " " + esc(" ".join(words[n:]))
    return out


def write_items(out, items, width=None):
    for tag, text in items:
        out.append(".TP %d" % width if width else ".TP")
        out.append(fmt_tag(tag))
        out.extend(text_line(t) for t in text)


def write_para(out, lines):
    """Prose at column 0 is filled; indented lines inside it are kept as examples."""
    out.append(".PP")
    i = 0
    while i < len(lines):
        if indent_of(lines[i]) == 0:
            out.append(text_line(lines[i].strip()))
            i += 1
            continue
        out.append(".RS 2")
        out.append(".nf")
        while i < len(lines) and indent_of(lines[i]) > 0:
            out.append(text_line(lines[i].rstrip()[2:] if lines[i].startswith("  ")
                                 else lines[i].rstrip()))
            i += 1
        out.append(".fi")
        out.append(".RE")


def write_block(out, block):
    kind, heading, lines = block
    if kind == "section":
        if heading != "subcommands":
            out.append(".SS " + esc(heading))
        write_items(out, parse_items(lines), 12 if heading == "subcommands" else None)
    elif is_list(lines):
        write_items(out, parse_items(lines))
    else:
        write_para(out, lines)


def man_page(cmd, summary, help_lines, version, all_cmds):
    """The roff text of lazyblk.1 (cmd None) or lazyblk-CMD.1."""
    page = "lazyblk" + ("-" + cmd if cmd else "")
    forms, rest = parse_synopsis(help_lines)
    blocks = split_blocks(rest)
    out = [
        '.\\" Generated by scripts/help2man.py from `lazyblk%s --help`: do not edit.'
        % (" " + cmd if cmd else ""),
        '.TH %s 1 "" "lazyblk %s" "lazyblk manual"' % (page.upper(), version),
        ".nh",
        ".ad l",
        ".SH NAME",
        "%s \\- %s" % (esc(page), esc(summary)),
        ".SH SYNOPSIS",
    ]
    for k, form in enumerate(forms):
        if k:
            out.append(".br")
        out.append(fmt_form(form, cmd))
    out.append(".SH DESCRIPTION")
    after = False
    exit_status = None
    for block in blocks:
        kind, heading, lines = block
        if kind == "section" and heading == "options":
            out.append(".SH OPTIONS")
            write_items(out, parse_items(lines))
            after = True
            continue
        if kind == "section" and heading == "subcommands":
            out.append(".SH COMMANDS")
        elif after and kind == "para" and lines[0].startswith("Exit status:"):
            exit_status = lines
            continue
        elif after and kind == "para" and ".SH NOTES" not in out:
            out.append(".SH NOTES")
        write_block(out, block)
    out.append(".SH EXIT STATUS")
    if exit_status:
        write_para(out, [exit_status[0][len("Exit status:"):].strip()] + exit_status[1:])
    else:
        out.append("Unless the description says otherwise: 0 on success, 1 on failure (one "
                   "line on standard error says why), 2 on a usage error (a bad option or "
                   "argument).")
    out.append(".SH SEE ALSO")
    others = ["lazyblk"] + ["lazyblk-" + c for c in all_cmds]
    refs = ["\\fB%s\\fR(1)" % esc(o) for o in others if o != page]
    out.append(",\n".join(refs))
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: scripts/help2man.py LAZYBLK OUTDIR")
    lazyblk, outdir = sys.argv[1], sys.argv[2]
    version = subprocess.run([lazyblk, "--version"], check=True, capture_output=True,
                             text=True).stdout.split()[-1]
    top = run_help(lazyblk)
    cmds = []
    for kind, heading, lines in split_blocks(parse_synopsis(top)[1]):
        if kind == "section" and heading == "subcommands":
            cmds = [(tag, " ".join(text)) for tag, text in parse_items(lines)]
    if not cmds:
        sys.exit("help2man.py: no subcommands: list in `%s --help`" % lazyblk)
    names = [c for c, _ in cmds]
    os.makedirs(outdir, exist_ok=True)
    first = [b for b in split_blocks(parse_synopsis(top)[1]) if b[0] == "para"][0][2]
    about = " ".join(l.strip() for l in first).rstrip(".")
    pages = [("lazyblk", None, about[:1].lower() + about[1:], top)]
    pages += [("lazyblk-" + c, c, s, run_help(lazyblk, c)) for c, s in cmds]
    for page, cmd, summary, lines in pages:
        text = man_page(cmd, summary, lines, version, names)
        tmp = os.path.join(outdir, page + ".1.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(outdir, page + ".1"))


if __name__ == "__main__":
    main()
