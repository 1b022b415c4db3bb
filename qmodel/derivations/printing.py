"""sympy expressions as LaTeX (for Markdown) and presentation MathML (for self-contained HTML).

Both use sympy's own printers. The MathML printer is sympy's ``MathMLPresentationPrinter``
(what ``sympy.printing.mathml.mathml(expr, printer="presentation")`` uses) with these fixes
for what the derivations print:

- names of undefined functions keep their case and their sub/superscripts (sympy lowercases
  them: ``M(theta)`` would print as m(θ));
- ``Piecewise`` is a brace with one row per case (sympy prints the word "piecewise");
- ``Heaviside(x)`` is θ(x) (sympy adds its value at 0 as a second argument), and Lambert's
  W on branch k is W_k(x);
- a product keeps a decaying exponential as the factor e^(-x) (sympy moves it into a
  denominator, as 1/e^x);
- ``Derivative`` of a function of one variable at a point prints as M′(θ), a factor with no
  parentheses, other derivatives put a sum in parentheses, and ``Subs`` prints as expr|ₓ₌ₐ
  (sympy writes "subs(...)");
- ``LaplaceTransform(f, t, s)`` is ℒ_t[f](s) and ``InverseLaplaceTransform(F, s, t, plane)``
  is ℒ⁻¹_s[F](t), as in LaTeX (sympy writes "laplacetransform(f, t, s)"), and an ``Order``
  term is O(x⁵), or O(f; x → a) away from 0 (sympy writes "order(x^5, (x, 0))");
- symbol names: a braced script is read as a formula (X_{n+1} is X with subscript n + 1, not
  the text "{n+1}"), digits in scripts are numbers, a name such as ``N(D)`` is N applied to D
  and trailing apostrophes are primes (sympy prints each as one upright identifier);
- a negative integer alone (the branch of W₋₁) has a minus sign, not a hyphen;
- a summand is in parentheses only when it is a sum, a sum or integral that ends a product
  has none (sympy's output has both, LaTeX's neither), and max and min are names like log
  (sympy spaces them as operators);
- ``Piecewise`` cases are left-aligned, and ⌊a/b⌋ is written on one line;

and typographic ones: a true minus sign, upright e and d, and brackets of normal size around
anything no taller than a line (:func:`_fit_fences`).

Browsers render MathML Core natively (Chromium since version 109, Firefox, Safari), so the HTML
needs no script and no network.
"""

from __future__ import annotations

import re

import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.printing.conventions import requires_partial, split_super_sub
from sympy.printing.latex import LatexPrinter
from sympy.printing.mathml import MathMLPresentationPrinter
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.pretty.pretty_symbology import greek_unicode

__all__ = ["to_latex", "to_mathml"]


class _Latex(LatexPrinter):
    def _print_Heaviside(self, expr, exp=None):
        out = r"\theta\left(%s\right)" % self._print(expr.args[0])
        return out if exp is None else r"%s^{%s}" % (out, exp)


class _MathML(MathMLPresentationPrinter):
    def _text(self, tag: str, text: str, **attrs):
        el = self.dom.createElement(tag)
        for k, v in attrs.items():
            el.setAttribute(k, v)
        el.appendChild(self.dom.createTextNode(text))
        return el

    # --- names -----------------------------------------------------------------------------
    _APPLIED = re.compile(r"([^()_^]+)\((.+)\)")
    _TOKEN = re.compile(r"[A-Za-z]+|[0-9]+(?:\.[0-9]+)?|\S")

    def _name(self, text: str):
        """An identifier or a Greek letter."""
        return self._text("mi", greek_unicode.get(text, text))

    def _script(self, text: str):
        """A sub- or superscript of a symbol name: ``2`` is a number, ``{n+1}`` a formula."""
        if text.startswith("{") and text.endswith("}"):
            text = text[1:-1]
        parts = []
        for token in self._TOKEN.findall(text):
            if token[0].isalpha():
                parts.append(self._name(token))
            elif token[0].isdigit():
                parts.append(self._text("mn", token))
            elif token == "*":
                parts.append(self._text("mi", "*"))     # as sympy: T* with a normal asterisk
            else:
                parts.append(self._text("mo", token))
        if len(parts) == 1:
            return parts[0]
        row = self.dom.createElement("mrow")
        for part in parts:
            row.appendChild(part)
        return row

    def _print_Symbol(self, sym, style="plain"):
        name = sym.name
        primes = len(name) - len(name.rstrip("'"))
        applied = self._APPLIED.fullmatch(name)
        if primes and primes < len(name):                       # W' is W with a prime
            row = self.dom.createElement("mrow")
            row.appendChild(self._print_Symbol(sp.Symbol(name[:-primes])))
            row.appendChild(self._text("mo", "′" * primes, lspace="0", rspace="0"))
            return row
        if applied:                                             # N(D) is N applied to D
            row = self.dom.createElement("mrow")
            row.appendChild(self._print_Symbol(sp.Symbol(applied[1])))
            args = [sp.Symbol(a.strip()) for a in applied[2].split(",")]
            row.appendChild(self._paren_comma_separated(*args))
            return row
        base, supers, subs = split_super_sub(name)
        x = self._name(base)
        if subs or supers:
            tag = "msubsup" if subs and supers else ("msub" if subs else "msup")
            script = self.dom.createElement(tag)
            script.appendChild(x)
            for scripts in (subs, supers):
                if scripts:
                    script.appendChild(self._joined(scripts))
            x = script
        if style == "bold":
            x.setAttribute("mathvariant", "bold")
        return x

    def _joined(self, scripts):
        if len(scripts) == 1:
            return self._script(scripts[0])
        row = self.dom.createElement("mrow")
        for i, part in enumerate(scripts):
            if i:
                row.appendChild(self._text("mo", ","))
            row.appendChild(self._script(part))
        return row

    def _print_Rational(self, e):
        if e.q == 1 and e.p < 0:                     # sympy: <mn>-1</mn>, with a hyphen
            row = self.dom.createElement("mrow")
            row.appendChild(self._text("mo", "-"))
            row.appendChild(self._text("mn", str(-e.p)))
            return row
        return super()._print_Rational(e)

    # --- functions and operators ----------------------------------------------------------
    def _transform(self, var, body, at, inverse=False):
        """ℒ_var[body](at), or ℒ⁻¹_var[body](at): sympy's LaTeX notation."""
        op = self.dom.createElement("msubsup" if inverse else "msub")
        op.appendChild(self._text("mi", "ℒ"))
        op.appendChild(self._print(var))
        if inverse:
            op.appendChild(self._print(sp.Integer(-1)))
        row = self.dom.createElement("mrow")
        row.appendChild(op)
        row.appendChild(self._text("mo", "["))
        row.appendChild(self._print(body))
        row.appendChild(self._text("mo", "]"))
        row.appendChild(self._paren_comma_separated(at))
        return row

    def _print_LaplaceTransform(self, e):
        f, t, s = e.args[:3]
        return self._transform(t, f, s)

    def _print_InverseLaplaceTransform(self, e):
        F, s, t = e.args[:3]                         # the fourth argument is the plane (None)
        return self._transform(s, F, t, inverse=True)

    def _print_Order(self, e):
        inner = self.dom.createElement("mrow")
        inner.appendChild(self._print(e.expr))
        if any(p != 0 for p in e.point) or len(e.variables) > 1:
            # away from 0, as sympy's LaTeX: O(f; x → a)
            variables = (self._print(e.variables[0]) if len(e.variables) == 1
                         else self._paren_comma_separated(*e.variables))
            point = (self._print(e.point[0]) if len(e.point) == 1
                     else self._paren_comma_separated(*e.point))
            inner.appendChild(self._text("mo", ";"))
            inner.appendChild(variables)
            inner.appendChild(self._text("mo", "→"))
            inner.appendChild(point)
        row = self.dom.createElement("mrow")
        row.appendChild(self._text("mi", "O"))
        paren = self.dom.createElement("mrow")
        paren.appendChild(self._l_paren())
        paren.appendChild(inner)
        paren.appendChild(self._r_paren())
        row.appendChild(paren)
        return row

    def _print_Function(self, e):
        if not isinstance(e, AppliedUndef):
            return super()._print_Function(e)
        row = self.dom.createElement("mrow")
        row.appendChild(self._print(sp.Symbol(e.func.__name__)))
        row.appendChild(self._paren_comma_separated(*e.args))
        return row

    def _print_Mul(self, expr):
        # sympy's printer splits a product with fraction(), which puts exp(-x) in the
        # denominator as 1/exp(x); keep decaying exponentials as factors e^(-x), as LaTeX does.
        # A sum or integral that ends a product needs no parentheses (LaTeX has none).
        decays = [f for f in expr.args
                  if isinstance(f, sp.exp) and f.args[0].could_extract_minus_sign()]
        big = [f for f in expr.args if isinstance(f, (sp.Sum, sp.Integral, sp.Product))]
        if decays:
            last = decays
        elif len(big) == 1 and sp.fraction(expr)[1] == 1:
            last = big
        else:
            return super()._print_Mul(expr)
        rest = sp.Mul(*[f for f in expr.args if f not in last])
        row = self.dom.createElement("mrow")
        if expr.could_extract_minus_sign():          # as sympy's _print_Add expects
            row.appendChild(self._text("mo", "-"))
            rest = -rest
        if rest != 1:
            row.appendChild(self.parenthesize(rest, PRECEDENCE["Mul"])
                            if precedence(rest) < PRECEDENCE["Mul"] else self._print(rest))
        for factor in last:
            row.appendChild(self._print(factor))
        return row

    def _print_Sum(self, e):
        # sympy puts any summand but a single factor in parentheses; LaTeX only a sum
        row = super()._print_Sum(e)
        row.replaceChild(self.parenthesize(e.function, PRECEDENCE["Mul"], strict=True),
                         row.lastChild)
        return row

    def _print_Product(self, e):
        # sympy has no MathML for a product (it prints the name): a sum's layout, with the
        # product sign as the operator (the first <mo>, the sum sign)
        row = self._print_Sum(sp.Sum(e.function, *e.limits))
        row.getElementsByTagName("mo")[0].firstChild.data = "\u220f"
        return row

    def _hprint_variadic_function(self, e):
        # max(a, b) as a name like log and lim (sympy makes "max" an operator, spaced as one)
        row = self.dom.createElement("mrow")
        row.appendChild(self._text("mi", type(e).__name__.lower()))
        row.appendChild(self._paren_comma_separated(*sorted(e.args, key=sp.default_sort_key)))
        return row

    _print_Max = _print_Min = _hprint_variadic_function

    def _print_floor(self, e):
        # ⌊t/D⌋ on one line: a stacked fraction in a summation limit is too small to read
        num, den = sp.fraction(e.args[0])
        if den == 1:
            return super()._print_floor(e)
        row = self.dom.createElement("mrow")
        row.appendChild(self._text("mo", "⌊"))
        for i, part in enumerate((num, den)):
            if i:
                row.appendChild(self._text("mo", "/", lspace="0", rspace="0"))
            row.appendChild(self.parenthesize(part, PRECEDENCE["Mul"], strict=True)
                            if not i else self.parenthesize(part, PRECEDENCE["Mul"]))
        row.appendChild(self._text("mo", "⌋"))
        return row

    def _print_LambertW(self, e):
        if len(e.args) == 1:
            return self._print_Function(e)
        row = self.dom.createElement("mrow")
        sub = self.dom.createElement("msub")
        sub.appendChild(self._text("mi", "W"))
        sub.appendChild(self._print(e.args[1]))
        row.appendChild(sub)
        row.appendChild(self._paren_comma_separated(e.args[0]))
        return row

    def _print_Heaviside(self, e):
        row = self.dom.createElement("mrow")
        row.appendChild(self._text("mi", "θ"))
        row.appendChild(self._paren_comma_separated(e.args[0]))
        return row

    @staticmethod
    def _is_prime(e) -> bool:
        """Whether a Derivative prints as M′(θ)."""
        f = e.expr
        return (isinstance(f, AppliedUndef) and len(f.args) == 1 and len(e.variables) == 1
                and f.args[0] == e.variables[0])

    def parenthesize(self, item, level, strict=False):
        if isinstance(item, sp.Derivative) and self._is_prime(item):
            return self._print(item)                 # M′(θ) is an atom: λM′(θ), not λ(M′(θ))
        return super().parenthesize(item, level, strict)

    def _print_Derivative(self, e):
        f = e.expr
        if self._is_prime(e):
            # The prime at full size: as a superscript most fonts draw it too small to see.
            row = self.dom.createElement("mrow")
            row.appendChild(self._print(sp.Symbol(f.func.__name__)))
            row.appendChild(self._text("mo", "′" * e.derivative_count, lspace="0",
                                       rspace="0"))
            row.appendChild(self._paren_comma_separated(*f.args))
            return row
        # d/dx f, with f in parentheses when it is a sum (sympy leaves them out)
        symbol = "∂" if requires_partial(f) else "d"
        num = self.dom.createElement("mrow")
        if e.derivative_count > 1:
            sup = self.dom.createElement("msup")
            sup.appendChild(self._text("mi", symbol, mathvariant="normal"))
            sup.appendChild(self._print(e.derivative_count))
            num.appendChild(sup)
        else:
            num.appendChild(self._text("mi", symbol, mathvariant="normal"))
        den = self.dom.createElement("mrow")
        for var, count in e.variable_count:
            den.appendChild(self._text("mi", symbol, mathvariant="normal"))
            if count > 1:
                sup = self.dom.createElement("msup")
                sup.appendChild(self._print(var))
                sup.appendChild(self._print(count))
                den.appendChild(sup)
            else:
                den.appendChild(self._print(var))
        frac = self.dom.createElement("mfrac")
        frac.appendChild(num)
        frac.appendChild(den)
        row = self.dom.createElement("mrow")
        row.appendChild(frac)
        row.appendChild(self.parenthesize(f, PRECEDENCE["Mul"])
                        if precedence(f) < PRECEDENCE["Mul"] else self._print(f))
        return row

    def _print_Subs(self, e):
        expr, old, new = e.args
        # (expr |)_(x=a), as LaTeX's \left. expr \right|_{x=a}: the bar, in a row with expr,
        # stretches to its height (an operator as the base of msub does not, in Chromium)
        row = self.dom.createElement("mrow")
        row.appendChild(self._print(expr))
        row.appendChild(self._text("mo", "|"))
        sub = self.dom.createElement("msub")
        sub.appendChild(row)
        at = self.dom.createElement("mrow")
        for i, (var, value) in enumerate(zip(old, new)):
            if i:
                at.appendChild(self._text("mo", ","))
            at.appendChild(self._print(var))
            at.appendChild(self._text("mo", "="))
            at.appendChild(self._print(value))
        sub.appendChild(at)
        return sub

    def _print_Piecewise(self, e):
        row = self.dom.createElement("mrow")
        row.appendChild(self._text("mo", "{"))
        table = self.dom.createElement("mtable")
        # columnalign for MathML 3 renderers (Firefox); Chromium implements MathML Core, which
        # has no columnalign but honours CSS text-align on the cells
        table.setAttribute("columnalign", "left left")
        for value, cond in e.args:
            tr = self.dom.createElement("mtr")
            left = self.dom.createElement("mtd")
            left.setAttribute("style", "text-align: left")
            left.appendChild(self._print(value))
            right = self.dom.createElement("mtd")
            right.setAttribute("style", "text-align: left")
            if cond == sp.true:
                right.appendChild(self._text("mtext", "\u2003otherwise"))
            else:
                inner = self.dom.createElement("mrow")
                inner.appendChild(self._text("mtext", "\u2003if\u2002"))
                inner.appendChild(self._print(cond))
                right.appendChild(inner)
            tr.appendChild(left)
            tr.appendChild(right)
            table.appendChild(tr)
        row.appendChild(table)
        return row


# Typography: a true minus sign, an upright e for exp and an upright d in integrals and
# derivatives (sympy uses the double-struck ExponentialE and DifferentialD, which look foreign
# next to the LaTeX output).
_TEXT_FIXES = (("<mo>-</mo>", "<mo>&#x2212;</mo>"),
               ("<mi>&ExponentialE;</mi>", '<mi mathvariant="normal">e</mi>'),
               ("<mo>&dd;</mo>", '<mi mathvariant="normal">d</mi>'))


_FENCES = frozenset("()[]{}|\u230a\u230b\u2308\u2309")
_LARGE_OPERATORS = frozenset("\u2211\u220f\u222b")
_SCRIPTS = frozenset(("msub", "msup", "msubsup", "munder", "mover", "munderover"))


def _elements(node):
    return [c for c in node.childNodes if c.nodeType == c.ELEMENT_NODE]


def _tall(node) -> bool:
    """Whether a node is taller than a line of text: a fraction, a table, a big operator or
    limits under or over something (scripts alone do not count)."""
    tag = node.tagName
    if tag in ("mfrac", "mtable", "msqrt", "mroot", "munder", "mover", "munderover"):
        return True
    children = _elements(node)
    if tag in _SCRIPTS:
        base = children[0]
        return (base.tagName == "mo" and base.firstChild is not None
                and base.firstChild.data in _LARGE_OPERATORS) or _tall(base)
    return any(_tall(c) for c in children)


def _fit_fences(node) -> None:
    """Brackets around a single line keep their normal size.

    MathML Core stretches every fence to cover its row, symmetrically about the math axis and
    with no shortfall allowed, so (1 − ρ), P(K = k) or S(k) get brackets one size up. TeX
    keeps the normal size there; so does this, by making the fences of a row with nothing
    taller than text non-stretchy.
    """
    children = _elements(node)
    fences = [c for c in children
              if c.tagName == "mo" and not c.hasAttribute("stretchy") and c.firstChild is not None
              and c.firstChild.data in _FENCES]
    if fences and not any(_tall(c) for c in children if c not in fences):
        for fence in fences:
            fence.setAttribute("stretchy", "false")
    for child in children:
        _fit_fences(child)


def to_latex(expr) -> str:
    """LaTeX of a sympy expression or equation (no surrounding dollars).

    Examples
    --------
    >>> import sympy as sp
    >>> to_latex(sp.Eq(sp.Symbol("rho"), sp.Symbol("lambda") / sp.Symbol("mu")))
    '\\\\rho = \\\\frac{\\\\lambda}{\\\\mu}'
    """
    return _Latex().doprint(expr)


def to_mathml(expr, display: bool = True) -> str:
    """A ``<math>`` element of presentation MathML for a sympy expression or equation.

    Examples
    --------
    >>> import sympy as sp
    >>> to_mathml(sp.Symbol("rho"), display=False)
    '<math><mi>&#961;</mi></math>'
    """
    element = _MathML()._print(expr)                 # as sympy's doprint, fences fitted
    _fit_fences(element)
    inner = element.toxml().encode("ascii", "xmlcharrefreplace").decode()
    for old, new in _TEXT_FIXES:
        inner = inner.replace(old, new)
    return f'<math display="block">{inner}</math>' if display else f"<math>{inner}</math>"
