"""The two kinds of mutant (tests/mutation_support.py runs them; the area catalogues
tests/mutants_*.py import these without importing the runner)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    name: str
    post: str       # where the ladder post describes it
    patches: tuple  # (file inside the package, qualname, old snippet, new snippet[, count]); see apply_patch
    kill: tuple = ()  # scenarios() to run (first failure catches); () = the kernel cases
    rebuild: tuple = ()  # rungs whose code objects the copy rebuilds from its patched source



@dataclass(frozen=True)
class CheckMutant:
    """A named function of the tree (package, tools, benchmarks) replaced in
    every loaded module that holds it by its mutated copy, then one real test
    of the suite run against it: that test must fail."""
    name: str
    post: str
    file: str        # relative to the repository root
    qualname: str    # "function" or "Class.method", or a module constant
    old: str
    new: str
    kill: tuple      # (test module, test function, {parameter: value})
    child: bool = False  # the kill test loads native code the mutant damages: run it in a child process

