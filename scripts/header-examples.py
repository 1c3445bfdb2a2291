#!/usr/bin/env python3
"""Compiles the example at the top of every public header (STYLE: a header opens with what it
is for and a compiling example, then `#pragma once`).

The example of a header is the LAST run of consecutive comment lines indented by three spaces
(`//   code`) in the comment block before `#pragma once`. Earlier indented runs are free
(protocol tables, formulas, shell commands); put the C++ last. Inside the example, `//` after
the code is an ordinary C++ comment.

Generation (`--out DIR`): one translation unit per folder group (graph, kernels, planner,
transport, actors, apps; kernels_cuda with --cuda), so ~90 examples cost 6 compilations. Each
TU includes test/support/example_prelude.hpp and the group's headers, then gives every
example its own namespace `ex_<path>` with `using namespace` for cohort and the header's own
namespaces (cohort::kernels, cohort::planner, ...; never a `detail` one). The example becomes

    [[maybe_unused]] static cohort::status example() { <the lines>  return {}; }

so an example may `return st;` or `return r.error();` as real code does, and may use the
chrono literals (`5s`, `200ms`). Facts are stated with assert(): test/CMakeLists.txt compiles
the target with NDEBUG undefined, so they are type-checked (never run), and without the
unused-variable warnings (an example may end on the value it shows). An example whose first
statement starts something that cannot live in a function (`struct `, `class `, `template`, `namespace N {`, or a function definition:
`int main(int argc, char** argv) {`, `caf::behavior pinger(caf::event_based_actor* self) {`)
is emitted at namespace scope instead, still in its own namespace. `#line` directives make
compiler errors name the header and its comment line.

The names the prelude declares (tiny_mlp, tiny_batch, sys) are documented there.

Check (`--check`): every header has an example, except the allow-list below; stale
allow-list entries fail too. Exit 1 with the list of headers without one.

kernels/cuda/ is compiled only with --cuda (CMake passes it when it found the CUDA toolkit:
cuda_check.hpp includes the CUDA runtime header); without it those headers are skipped and
listed as such. They are still checked for having an example.
"""
import argparse
import os
import re
import sys

GROUPS = ["graph", "kernels", "planner", "transport", "actors", "apps"]
CUDA_DIR = "kernels/cuda"

# Headers that need no example: internal helpers with no use outside their own folder's .cpp
# files (a `detail` namespace). Keep this short; every other header shows its use.
NO_EXAMPLE_NEEDED = {
    "kernels/detail/broadcast.hpp": "index arithmetic of the kernels' own loops (kernels::detail)",
    "transport/ring.hpp": "the steps the collectives' .cpp files are made of (transport::detail)",
    "transport/control_peer.hpp": "control_plane's private per-connection record (no code outside can name it)",
}

# Standard headers every generated TU includes, for examples that use them.
STD_HEADERS = ["cassert", "chrono", "cmath", "cstdint", "cstdio", "iostream", "map", "memory",
               "string", "thread", "vector"]

SCOPE_START = re.compile(r"^(struct |class |template\s*<|namespace\s+[\w:]+\s*\{)")
# A function definition's first line: a return type, a name, the parameters, `{`.
FUNCTION_START = re.compile(r"^[A-Za-z_][\w:<>,\s&*]*[\s&*]\w+\([^\[\]{}]*\)\s*(const\s*)?\{$")
CONTROL = re.compile(r"^(if|else|for|while|switch|do|return)\b")
EXAMPLE_LINE = re.compile(r"^//   ")


def headers(root):
    """(group, path, under kernels/cuda/) of every public header, sorted."""
    out = []
    for group in GROUPS:
        for dirpath, _, files in os.walk(os.path.join(root, group)):
            for f in files:
                if not f.endswith(".hpp"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                in_cuda = rel.startswith(CUDA_DIR + "/")
                out.append(("kernels_cuda" if in_cuda else group, rel, in_cuda))
    return sorted(out, key=lambda h: (h[0], h[1]))


def leading_comment(path):
    """The lines of the comment block before `#pragma once`, with their 1-based numbers."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if not line.startswith("//"):
                break
            lines.append((number, line))
    return lines


def example_of(path):
    """(first line number, code lines) of the header's example, or None."""
    runs, current = [], []
    for number, line in leading_comment(path):
        if EXAMPLE_LINE.match(line):
            current.append((number, line[5:]))
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    if not runs:
        return None
    last = runs[-1]
    return last[0][0], [code for _, code in last]


def namespaces_of(path):
    """`using namespace` targets: cohort and each level of the header's namespaces (no detail)."""
    found = ["cohort"]
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^namespace\s+([A-Za-z_][A-Za-z0-9_:]*)\s*\{", line)
            if not m:
                continue
            parts = m.group(1).split("::")
            for i in range(1, len(parts) + 1):
                if "detail" in parts[:i]:
                    break
                ns = "::".join(parts[:i])
                if ns not in found:
                    found.append(ns)
    return found


def at_namespace_scope(code):
    """Whether the first statement (its lines up to the first `{` or `;`) is a definition."""
    first = []
    for line in code:
        stripped = line.split("//")[0].strip()
        if not stripped:
            continue
        first.append(stripped)
        if "{" in stripped or ";" in stripped:
            break
    head = " ".join(first)
    if not head or CONTROL.match(head):
        return False
    return bool(SCOPE_START.match(head) or FUNCTION_START.match(head))


def ident(rel):
    return "ex_" + re.sub(r"[^A-Za-z0-9]", "_", rel[: -len(".hpp")])


def generate(root, out_dir, cuda):
    by_group = {}
    for group, rel, in_cuda in headers(root):
        if in_cuda and not cuda:
            continue
        by_group.setdefault(group, []).append(rel)
    os.makedirs(out_dir, exist_ok=True)
    groups = GROUPS + (["kernels_cuda"] if cuda else [])
    for group in groups:
        name = f"{group}.cpp"
        target = os.path.join(out_dir, name)
        text = render(root, group, by_group.get(group, []), out_dir, name)
        old = None
        if os.path.exists(target):
            with open(target, encoding="utf-8") as f:
                old = f.read()
        if old != text:  # unchanged files keep their time stamp: nothing recompiles
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)


def render(root, group, rels, out_dir, name):
    out = [f"// Generated by scripts/header-examples.py from the headers' leading comments. Do not edit.",
           f"// The examples of the {group} headers, each in its own namespace.",
           ""]
    out += [f"#include <{h}>" for h in STD_HEADERS]
    out += ["", '#include "test/support/example_prelude.hpp"', ""]
    out += [f'#include "{rel}"' for rel in rels]
    out.append("")
    for rel in rels:
        ex = example_of(os.path.join(root, rel))
        if ex is None:
            continue
        first, code = ex
        out.append(f"namespace {ident(rel)} {{")
        out += [f"using namespace {ns};" for ns in namespaces_of(os.path.join(root, rel))]
        out.append("using namespace cohort::examples;")
        out.append("using namespace std::chrono_literals;")
        scoped = at_namespace_scope(code)
        if not scoped:
            out.append("[[maybe_unused]] static cohort::status example() {")
        out.append(f'#line {first} "{os.path.join(root, rel)}"')
        out += code
        out.append(f'#line {len(out) + 2} "{os.path.join(out_dir, name)}"')
        if not scoped:
            out.append("  return {};")
            out.append("}")
        out.append(f"}}  // namespace {ident(rel)}")
        out.append("")
    return "\n".join(out) + "\n"


def check(root):
    """0 when every header has an example (or is allow-listed); else 1, listing what is wrong."""
    all_headers = headers(root)
    missing, allowed_but_has, cuda = [], [], []
    for _, rel, in_cuda in all_headers:
        has = example_of(os.path.join(root, rel)) is not None
        if rel in NO_EXAMPLE_NEEDED:
            if has:
                allowed_but_has.append(rel)
        elif not has:
            missing.append(rel)
        if in_cuda:
            cuda.append(rel)
    stale = [rel for rel in NO_EXAMPLE_NEEDED if not os.path.exists(os.path.join(root, rel))]
    if missing:
        print("headers without an example (`//   code` lines before #pragma once):")
        for rel in missing:
            print(f"  {rel}")
    for rel in allowed_but_has:
        print(f"{rel} has an example now: remove it from NO_EXAMPLE_NEEDED in scripts/header-examples.py")
    for rel in stale:
        print(f"{rel} is in NO_EXAMPLE_NEEDED but does not exist")
    internal = len(NO_EXAMPLE_NEEDED) - len(stale)
    print(f"{len(all_headers)} headers: {len(all_headers) - len(missing) - internal} with an example, "
          f"{len(missing)} without, {internal} internal ({', '.join(sorted(NO_EXAMPLE_NEEDED))})")
    if cuda:
        print(f"compiled only with the CUDA toolkit (--cuda): {', '.join(cuda)}")
    return 1 if missing or allowed_but_has or stale else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    p.add_argument("--out", help="write the generated translation units here")
    p.add_argument("--cuda", action="store_true", help="also compile the kernels/cuda/ examples")
    p.add_argument("--check", action="store_true", help="fail when a header has no example")
    p.add_argument("--print", metavar="HEADER", help="print the example of one header (a path from the root)")
    a = p.parse_args()
    root = os.path.abspath(a.root)
    if a.print:
        ex = example_of(os.path.join(root, a.print))
        print("\n".join(ex[1]) if ex else f"{a.print}: no example")
        return 0
    rc = 0
    if a.out:
        generate(root, a.out, a.cuda)
    if a.check:
        rc = check(root)
    if not a.out and not a.check:
        p.print_usage()
        rc = 2
    return rc


if __name__ == "__main__":
    sys.exit(main())
