"""Follow one value through the calls that receive it, module by module, and count how often
the walk comes back to a module it had left (the house review's measure of a value that
shuttles between modules: run_sweep's ``config``, 62 stays and 47 returns at 5d326c8).

Static and approximate, the same on any tree: from a function and one of its parameters,
every call in the body that passes that parameter or a part of it (``config.budget_bytes``)
as an argument, or calls one of its methods, is entered, depth first, each (function, parameter)
once; the walk's module sequence records a stay on entering a callee in another module and
another on coming back to the caller's. ``returns``: stays in a module the walk had already
been in.

    python benchmarks/walk_settings.py [SRC] [--from tune/sweep.py:run_sweep:config] [--derived]
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Module:
    name: str  # 'tune/sweep.py'
    tree: ast.Module
    functions: dict[str, ast.FunctionDef]  # top-level functions and Class.method
    imports: dict[str, str]  # local name -> 'module.dotted' or 'module.dotted:attr'


def load(src: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    pkg = src / "vramtune"
    for path in pkg.rglob("*.py"):
        tree = ast.parse(path.read_text())
        functions: dict[str, ast.FunctionDef] = {}
        imports: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        functions[f"{node.name}.{item.name}"] = item
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vramtune"):
                for alias in node.names:
                    imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        modules[str(path.relative_to(pkg))] = Module(str(path.relative_to(pkg)), tree, functions, imports)
    return modules


def module_file(dotted: str, modules: dict[str, Module]) -> str | None:
    rel = dotted.removeprefix("vramtune").lstrip(".").replace(".", "/")
    for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
        if candidate in modules:
            return candidate
    return None


def resolve(call: ast.Call, mod: Module, modules: dict[str, Module]) -> tuple[str, str] | None:
    """(module file, function key) of a call to the package's own code, where it can be told."""
    f = call.func
    if isinstance(f, ast.Name):
        if f.id in mod.functions:
            return mod.name, f.id
        target = mod.imports.get(f.id)
        if target:
            where, name = target.split(":")
            file = module_file(where, modules)
            if file is None:  # 'from vramtune.tune import search' then search(...)? not a call
                return None
            if name in modules[file].functions:
                return file, name
            # a class: its constructor is not followed
        return None
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        target = mod.imports.get(f.value.id)
        if target:  # module.function
            where, name = target.split(":")
            file = module_file(f"{where}.{name}", modules)
            if file and f.attr in modules[file].functions:
                return file, f.attr
    return None


def method_of(call: ast.Call, param: str, modules: dict[str, Module]) -> tuple[str, str] | None:
    """``param.method(...)``: the package's method of that name (the first class that has it)."""
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == param:
        for file, m in sorted(modules.items()):
            for key in m.functions:
                if "." in key and key.split(".", 1)[1] == f.attr:
                    return file, key
    return None


def _rooted(expr: ast.expr, param: str) -> bool:
    """``param`` itself or a part of it (``param.budget_bytes``, ``param.settings.confirm``)."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id == param


def passes(call: ast.Call, tracked: set[str], fn: ast.FunctionDef) -> list[str]:
    """The callee's parameters that receive a tracked value or a part of it."""
    names = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    got = [names[i] for i, arg in enumerate(call.args)
           if i < len(names) and any(_rooted(arg, t) for t in tracked)]
    got += [kw.arg for kw in call.keywords
            if kw.arg and any(_rooted(kw.value, t) for t in tracked)]
    return got


def derived(fn: ast.FunctionDef, param: str, follow: bool) -> set[str]:
    """``param``, and with ``follow`` every local assigned from it: a part of it
    (``limit = config.limit_bytes``) or what a call given it returns (``space =
    config.space()``)."""
    tracked = {param}
    if not follow:
        return tracked
    for node in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign | ast.AnnAssign)),
                       key=lambda n: n.lineno):
        value = node.value
        if value is None:
            continue
        uses = any(isinstance(n, ast.Name) and n.id in tracked for n in ast.walk(value))
        if uses:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                tracked |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return tracked


def walk(modules: dict[str, Module], start: tuple[str, str, str], follow: bool) -> list[str]:
    seq: list[str] = []
    seen: set[tuple[str, str, str]] = set()

    def stay(name: str) -> None:
        if not seq or seq[-1] != name:
            seq.append(name)

    def visit(file: str, key: str, param: str) -> None:
        if (file, key, param) in seen:
            return
        seen.add((file, key, param))
        stay(file)
        fn = modules[file].functions[key]
        tracked = derived(fn, param, follow)
        calls = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            method = next((m for t in tracked if (m := method_of(call, t, modules))), None)
            if method is not None:
                mfile, mkey = method
                self_name = modules[mfile].functions[mkey].args.args[0].arg
                visit(mfile, mkey, self_name)
                stay(file)
                continue
            target = resolve(call, modules[file], modules)
            if target is None:
                continue
            tfile, tkey = target
            for received in passes(call, tracked, modules[tfile].functions[tkey]):
                visit(tfile, tkey, received)
                stay(file)

    visit(*start)
    return seq


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--from", dest="start", default="tune/sweep.py:run_sweep:config")
    parser.add_argument("--derived", action="store_true",
                        help="follow the locals assigned from the value too")
    args = parser.parse_args()
    modules = load(Path(args.src))
    file, key, param = args.start.split(":")
    seq = walk(modules, (file, key, param), args.derived)
    returns = sum(1 for i, m in enumerate(seq) if m in seq[:i])
    counts = {m: seq.count(m) for m in dict.fromkeys(seq)}
    print(f"{args.start}: {len(seq)} stays in {len(counts)} modules, {returns} returns")
    try:
        for m, c in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"  {c:3d}  {m}")
    except BrokenPipeError:  # | head
        pass


if __name__ == "__main__":
    main()
