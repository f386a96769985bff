"""Patches of C source anchored by meaning, as mutation_support's AST patches are for Python:
a function named by its name and, inside its body, a snippet compared token by token
(whitespace and comments ignored), so reformatting or a moved comment does not retire a
mutant. A function that is gone, or a snippet that does not match the stated number of
times, fails loudly instead of testing unmutated code.

    c_patch(text, function, old, new, count=1) -> the patched text
"""

import re

_TOKEN = re.compile(r"""
    (?P<space>\s+|/\*.*?\*/|//[^\n]*)          # skipped
  | (?P<token>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[A-Za-z_]\w*|\d[\w.]*|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!~<>=?:;,.(){}\[\]#])
""", re.S | re.X)


def tokens(text: str, start: int = 0, end: int = None):
    """[(token, start, end)] of text[start:end], comments and whitespace skipped."""
    end = len(text) if end is None else end
    out, pos = [], start
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise AssertionError(f"cannot tokenize C at {text[pos:pos + 20]!r}")
        if m.group("token"):
            out.append((m.group("token"), m.start(), m.end()))
        pos = m.end()
    return out


def function_body(text: str, name: str):
    """(start, end) of the body `{...}` of the C function `name` (its definition, not a prototype)."""
    toks = tokens(text)
    for i, (t, _, _) in enumerate(toks):
        if t != name or i + 1 >= len(toks) or toks[i + 1][0] != "(":
            continue
        depth, j = 0, i + 1
        while j < len(toks):  # past the parameter list
            depth += toks[j][0] == "("
            depth -= toks[j][0] == ")"
            j += 1
            if depth == 0:
                break
        if j < len(toks) and toks[j][0] == "{":
            depth, k = 0, j
            while k < len(toks):
                depth += toks[k][0] == "{"
                depth -= toks[k][0] == "}"
                if depth == 0:
                    return toks[j][1], toks[k][2]
                k += 1
    raise AssertionError(f"C function {name!r} not found: update the mutant")


def c_patch(text: str, function: str, old: str, new: str, count: int = 1) -> str:
    start, end = function_body(text, function)
    body = tokens(text, start, end)
    want = [t for t, _, _ in tokens(old)]
    spans = []
    i = 0
    while i <= len(body) - len(want):
        if [t for t, _, _ in body[i:i + len(want)]] == want:
            spans.append((body[i][1], body[i + len(want) - 1][2]))
            i += len(want)
        else:
            i += 1
    if len(spans) != count:
        raise AssertionError(f"C patch matches {len(spans)} times in {function} (expected exactly {count}): {old!r}")
    for a, b in reversed(spans):
        text = text[:a] + new + text[b:]
    return text
