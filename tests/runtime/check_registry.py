#!/usr/bin/env python3
"""The op registry (include/kernelkit/ops.def) against what cannot be derived from it in C++: a CPU test.

    python3 tests/runtime/check_registry.py --build-toml BUILD/build.toml [--fix]

Checks, and names every difference it finds:
  - each registry row's family has its folders (src/ops/<family>/sources.cmake, tests/<family>/tests.cmake);
  - the torch schemas: the ops m.def'd in torch-ext/csrc/<family>.cpp are exactly the registry's torch_ops of that
    family;
  - the Python package: torch-ext/kernelkit/_<family>.py's __all__ is exactly the registry's python names of that
    family, its _OPS exactly the family's torch ops, and __init__.py's _FAMILIES lists every family module;
  - README.md's support matrix has a row for every op;
  - build.toml equals the one CMake generates from the families' source lists (--build-toml, written by
    cmake/BuildToml.cmake at configure time); --fix copies the generated one over it.
"""
import argparse
import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def split_args(text):
    """The comma-separated arguments of a macro call body, respecting strings and parentheses."""
    args, depth, cur, quote = [], 0, "", False
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quote = not quote
        if not quote:
            if ch in "(":
                depth += 1
            elif ch == ")":
                depth -= 1
            elif ch == "," and depth == 0:
                args.append(cur.strip())
                cur = ""
                continue
        cur += ch
    args.append(cur.strip())
    return args


def registry():
    text = (ROOT / "include/kernelkit/ops.def").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    rows = []
    for m in re.finditer(r"^KK_OP\(", text, re.M):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0) if text[i] != '"' else 0
            if text[i] == '"':  # skip a string literal
                i = text.index('"', i + 1)
            i += 1
        a = split_args(text[m.end():i - 1])
        strings = [" ".join(re.findall(r'"([^"]*)"', x)) for x in a[3:5]]
        rows.append({"id": a[0], "family": a[1], "torch": strings[0].split(), "python": strings[1].split()})
    return rows


def python_lists(path):
    """__all__ and _OPS of a module, as written (literals)."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("__all__", "_OPS", "_FAMILIES"):
                v = node.value
                out[name] = [e.value if isinstance(e, ast.Constant) else e.id for e in v.elts] \
                    if isinstance(v, (ast.List, ast.Tuple)) else None
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-toml", type=pathlib.Path, help="the build.toml CMake generated")
    p.add_argument("--fix", action="store_true", help="write the generated build.toml over the committed one")
    a = p.parse_args(argv)
    rows = registry()
    errors = []
    if not rows:
        errors.append("no KK_OP rows found in include/kernelkit/ops.def")
    families = sorted({r["family"] for r in rows})
    for fam in families:
        for need in (f"src/ops/{fam}/sources.cmake", f"tests/{fam}/tests.cmake"):
            if not (ROOT / need).is_file():
                errors.append(f"family {fam}: {need} is missing")
    # torch schemas, per family binding file
    schema_re = re.compile(r'(?:m\.def|def_op)\(\s*(?:m,\s*)?"(\w+)\(')
    for fam in families:
        want = sorted({t for r in rows if r["family"] == fam for t in r["torch"]})
        src = ROOT / f"torch-ext/csrc/{fam}.cpp"
        have = sorted(set(schema_re.findall(src.read_text()))) if src.is_file() else []
        if want and not src.is_file():
            errors.append(f"family {fam}: torch ops {want} but no torch-ext/csrc/{fam}.cpp")
        elif want != have:
            errors.append(f"family {fam}: registry torch ops {want}, torch-ext/csrc/{fam}.cpp defines {have}")
    for src in sorted((ROOT / "torch-ext/csrc").glob("*.cpp")):
        if src.stem not in families and src.stem != "binding":
            errors.append(f"torch-ext/csrc/{src.name}: no registry family '{src.stem}'")
    # Python modules
    for fam in families:
        path = ROOT / f"torch-ext/kernelkit/_{fam}.py"
        want_py = sorted({n for r in rows if r["family"] == fam for n in r["python"]})
        want_ops = sorted({t for r in rows if r["family"] == fam for t in r["torch"]})
        if not (want_py or want_ops):
            continue
        if not path.is_file():
            errors.append(f"family {fam}: Python functions {want_py} but no torch-ext/kernelkit/_{fam}.py")
            continue
        lists = python_lists(path)
        if sorted(lists.get("__all__") or []) != want_py:
            errors.append(f"{path.relative_to(ROOT)}: __all__ {sorted(lists.get('__all__') or [])}, registry "
                          f"python names {want_py}")
        if sorted(lists.get("_OPS") or []) != want_ops:
            errors.append(f"{path.relative_to(ROOT)}: _OPS {sorted(lists.get('_OPS') or [])}, registry torch ops "
                          f"{want_ops}")
    listed = python_lists(ROOT / "torch-ext/kernelkit/__init__.py").get("_FAMILIES") or []
    modules = sorted(f"_{fam}" for fam in families if (ROOT / f"torch-ext/kernelkit/_{fam}.py").is_file())
    if sorted(listed) != modules:
        errors.append(f"torch-ext/kernelkit/__init__.py: _FAMILIES {sorted(listed)}, family modules {modules}")
    # README support matrix
    readme = (ROOT / "README.md").read_text()
    matrix = [line for line in readme.splitlines() if line.startswith("|")]
    for r in rows:
        if not any(re.search(r"`%s`" % re.escape(r["id"]), line) for line in matrix):
            errors.append(f"README.md: the support matrix has no row naming `{r['id']}`")
    # build.toml
    if a.build_toml:
        generated = a.build_toml.read_text()
        committed = ROOT / "build.toml"
        if a.fix:
            committed.write_text(generated)
            print(f"wrote {committed}")
        elif committed.read_text() != generated:
            errors.append(f"build.toml differs from the one CMake generates ({a.build_toml}): run "
                          f"python3 tests/runtime/check_registry.py --build-toml {a.build_toml} --fix")
    for e in errors:
        print("registry:", e)
    print(f"registry: {len(rows)} ops in {len(families)} families, {len(errors)} difference(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
