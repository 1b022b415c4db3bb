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
- ``Derivative`` of a function of one variable at a point prints as M′(θ), other derivatives
  put a sum in parentheses, and ``Subs`` prints as expr|ₓ₌ₐ (sympy writes "subs(...)");

and typographic ones: a true minus sign, upright e and d.

Browsers render MathML Core natively (Chromium since version 109, Firefox, Safari), so the HTML
needs no script and no network.
"""

from __future__ import annotations

import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.printing.conventions import requires_partial
from sympy.printing.latex import LatexPrinter
from sympy.printing.mathml import MathMLPresentationPrinter
from sympy.printing.precedence import PRECEDENCE, precedence

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
        decays = [f for f in expr.args
                  if isinstance(f, sp.exp) and f.args[0].could_extract_minus_sign()]
        if not decays:
            return super()._print_Mul(expr)
        rest = sp.Mul(*[f for f in expr.args if f not in decays])
        row = self.dom.createElement("mrow")
        if expr.could_extract_minus_sign():          # as sympy's _print_Add expects
            row.appendChild(self._text("mo", "-"))
            rest = -rest
        if rest != 1:
            row.appendChild(self.parenthesize(rest, PRECEDENCE["Mul"])
                            if precedence(rest) < PRECEDENCE["Mul"] else self._print(rest))
        for factor in decays:
            row.appendChild(self._print(factor))
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

    def _print_Derivative(self, e):
        f = e.expr
        if (isinstance(f, AppliedUndef) and len(f.args) == 1 and len(e.variables) == 1
                and f.args[0] == e.variables[0]):
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
        row = self.dom.createElement("mrow")
        row.appendChild(self._print(expr))
        sub = self.dom.createElement("msub")
        sub.appendChild(self._text("mo", "|", stretchy="true"))
        at = self.dom.createElement("mrow")
        for i, (var, value) in enumerate(zip(old, new)):
            if i:
                at.appendChild(self._text("mo", ","))
            at.appendChild(self._print(var))
            at.appendChild(self._text("mo", "="))
            at.appendChild(self._print(value))
        sub.appendChild(at)
        row.appendChild(sub)
        return row

    def _print_Piecewise(self, e):
        row = self.dom.createElement("mrow")
        row.appendChild(self._text("mo", "{"))
        table = self.dom.createElement("mtable")
        table.setAttribute("columnalign", "left left")
        for value, cond in e.args:
            tr = self.dom.createElement("mtr")
            left = self.dom.createElement("mtd")
            left.appendChild(self._print(value))
            right = self.dom.createElement("mtd")
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
    inner = _MathML().doprint(expr)
    for old, new in _TEXT_FIXES:
        inner = inner.replace(old, new)
    return f'<math display="block">{inner}</math>' if display else f"<math>{inner}</math>"
