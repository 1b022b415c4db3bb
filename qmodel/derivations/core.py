"""The building blocks of a derivation: steps of prose and sympy expressions, and results.

A :class:`Derivation` is plain data: a title, its sources, the assumptions it rests on, the steps
that lead from them to the result (each a sentence or two and the sympy expressions it
produces), and the final expressions as :class:`Result` objects. The modules of
:mod:`qmodel.derivations` build one each; :mod:`qmodel.derive` renders them as documents, and
the tests turn the results into numbers (``sympy.lambdify``) to compare them with qmodel's solvers.

The helpers here keep the derivation modules short: :func:`check_zero` makes a derivation verify
the identities it relies on (it raises instead of rendering a wrong document), and
:func:`geometric_sum` lets sympy sum a geometric series while recording where it converges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

__all__ = ["Step", "Result", "Derivation", "Expect", "Prob", "Mean", "MaxOver", "eq", "gt", "le",
           "subscripted_function", "check_zero", "geometric_sum"]


@dataclass(frozen=True)
class Step:
    """One step of a derivation.

    Parameters
    ----------
    text : str
        What the step does and why, in a sentence or two (plain text; Unicode symbols allowed).
    math : tuple of sympy objects
        The expressions or equations (``sympy.Eq``) the step produces, shown as display math.
    """

    text: str
    math: tuple = ()


@dataclass(frozen=True)
class Result:
    """A final expression of a derivation: ``lhs = rhs``.

    Parameters
    ----------
    name : str
        The key by which code and tests look it up (``Derivation.result(name)``).
    lhs : sympy object or None
        What the expression is, for display; a plain Symbol makes the result a definition that
        :meth:`Derivation.explicit` substitutes into the other results. None for a result that
        is an equation (rhs an ``Eq``).
    rhs : sympy object
        The expression (or a ``sympy.Eq`` for a result that is an equation to solve).
    note : str
        One line: what it is, and where qmodel uses it.
    """

    name: str
    lhs: object
    rhs: object
    note: str = ""


@dataclass(frozen=True)
class Derivation:
    """A derivation of closed-form results, as data.

    Attributes
    ----------
    key : str
        File-name-safe identifier (the module name).
    title, summary : str
    sources : tuple of str
        Authors, year and publication of each source.
    assumptions : tuple of str
    steps : tuple of Step
    results : tuple of Result
    symbols : dict
        The parameters by name (``"lam"``, ``"mu"``, ...), for lambdify.
    implemented_by : str
        The qmodel function that computes the result, or a note that none does yet.
    """

    key: str
    title: str
    summary: str
    sources: tuple
    assumptions: tuple
    steps: tuple
    results: tuple
    symbols: dict = field(default_factory=dict)
    implemented_by: str = ""

    def result(self, name: str):
        """The right-hand side of the result called ``name``."""
        for r in self.results:
            if r.name == name:
                return r.rhs
        raise KeyError(f"{self.key} has no result {name!r}; it has "
                       f"{[r.name for r in self.results]}")

    def explicit(self, name: str):
        """The result ``name`` with every definition (a result whose lhs is a Symbol) substituted.

        Substitutes repeatedly, so definitions may use each other; stops after 10 rounds.
        """
        expr = self.result(name)
        defs = {r.lhs: r.rhs for r in self.results
                if isinstance(r.lhs, sp.Symbol) and r.name != name}
        for _ in range(10):
            new = expr.subs(defs)
            if new == expr:
                break
            expr = new
        return expr


# MathML Core renders mathvariant="double-struck" as plain italic: use the character itself.
DOUBLE_STRUCK_E = "\U0001D53C"


class Expect(sp.Symbol):
    """A symbol that stands for an expectation and prints as E[...].

    ``Expect("S^2")`` prints as E[S²] in LaTeX and MathML; its name is ``E[S^2]``. It is a
    positive symbol unless other assumptions are given (``Expect("U", real=True)``).
    """

    def __new__(cls, inner: str, **assumptions):
        if not assumptions:
            assumptions = {"positive": True}
        obj = super().__new__(cls, f"E[{inner}]", **assumptions)
        return obj

    @property
    def inner(self) -> str:
        return self.name[2:-1]

    def _latex(self, printer):
        return r"\mathbb{E}\left[%s\right]" % printer._print(sp.Symbol(self.inner))

    def _mathml_presentation(self, printer):
        dom = printer.dom
        row = dom.createElement("mrow")
        e = dom.createElement("mi")
        e.appendChild(dom.createTextNode(DOUBLE_STRUCK_E))
        row.appendChild(e)
        for part in ("[", None, "]"):
            if part is None:
                row.appendChild(printer._print(sp.Symbol(self.inner)))
            else:
                mo = dom.createElement("mo")
                mo.setAttribute("stretchy", "false")
                mo.appendChild(dom.createTextNode(part))
                row.appendChild(mo)
        return row


class _Bracketed(sp.Function):
    """Prints as NAME(arg) or NAME(arg | condition), with the brackets below (labels only)."""

    _name, _open, _close, _variant = "P", "(", ")", None

    def _latex(self, printer, exp=None):
        name = r"\mathbb{%s}" % self._name if self._variant else self._name
        body = r" \,\middle|\, ".join(printer._print(a) for a in self.args)
        out = r"%s\left%s %s \right%s" % (name, self._open, body, self._close)
        return out if exp is None else r"%s^{%s}" % (out, exp)

    def _mathml_presentation(self, printer):
        dom = printer.dom
        row = dom.createElement("mrow")

        def add(tag, text, **attrs):
            el = dom.createElement(tag)
            for key, value in attrs.items():
                el.setAttribute(key, value)
            el.appendChild(dom.createTextNode(text))
            row.appendChild(el)

        add("mi", DOUBLE_STRUCK_E if self._variant else self._name)
        add("mo", self._open)
        for i, arg in enumerate(self.args):
            if i:
                add("mo", "|")
            row.appendChild(printer._print(arg))
        add("mo", self._close)
        return row


class Prob(_Bracketed):
    """A label: ``Prob(event)`` prints as P(event), ``Prob(event, given)`` as P(event | given)."""

    _name, _open, _close = "P", "(", ")"


class Mean(_Bracketed):
    """A label: ``Mean(x)`` prints as E[x], ``Mean(x, given)`` as E[x | given]."""

    _name, _open, _close, _variant = "E", "[", "]", "double-struck"


class MaxOver(sp.Function):
    """A label: ``MaxOver(expr, k, n)`` prints as the maximum of expr over k <= n."""

    def _latex(self, printer, exp=None):
        body, index, top = self.args
        out = r"\max_{%s \le %s}\left(%s\right)" % (printer._print(index), printer._print(top),
                                                    printer._print(body))
        return out if exp is None else r"%s^{%s}" % (out, exp)

    def _mathml_presentation(self, printer):
        body, index, top = self.args
        dom = printer.dom
        under = dom.createElement("munder")
        mo = dom.createElement("mo")
        mo.appendChild(dom.createTextNode("max"))
        under.appendChild(mo)
        below = dom.createElement("mrow")
        below.appendChild(printer._print(index))
        le_sign = dom.createElement("mo")
        le_sign.appendChild(dom.createTextNode("≤"))
        below.appendChild(le_sign)
        below.appendChild(printer._print(top))
        under.appendChild(below)
        row = dom.createElement("mrow")
        row.appendChild(under)
        row.appendChild(printer._paren_comma_separated(body))
        return row


def eq(lhs, rhs):
    """The equation lhs = rhs, unevaluated (sympy would turn some into True or False)."""
    return sp.Eq(lhs, rhs, evaluate=False)


def gt(lhs, rhs):
    """The event lhs > rhs, unevaluated (for labels)."""
    return sp.StrictGreaterThan(lhs, rhs, evaluate=False)


def le(lhs, rhs):
    """The event lhs <= rhs, unevaluated (for labels)."""
    return sp.LessThan(lhs, rhs, evaluate=False)


def subscripted_function(name: str):
    """An undefined sympy function whose first argument prints as a subscript: A_k(z).

    Parameters
    ----------
    name : str
        The function's name, e.g. ``"A"``.

    Returns
    -------
    sympy.FunctionClass
        ``f = subscripted_function("A"); f(k, z)`` prints as A_k(z).
    """

    def _latex(self, printer, exp=None):
        sub, *rest = self.args
        out = r"%s_{%s}\left(%s\right)" % (name, printer._print(sub),
                                          ", ".join(printer._print(a) for a in rest))
        return out if exp is None else r"%s^{%s}" % (out, exp)

    def _mathml_presentation(self, printer):
        dom = printer.dom
        sub, *rest = self.args
        msub = dom.createElement("msub")
        mi = dom.createElement("mi")
        mi.appendChild(dom.createTextNode(name))
        msub.appendChild(mi)
        msub.appendChild(printer._print(sub))
        row = dom.createElement("mrow")
        row.appendChild(msub)
        row.appendChild(printer._paren_comma_separated(*rest))
        return row

    def fdiff(self, argindex=1):
        return sp.Derivative(self, self.args[argindex - 1])

    return type(name, (sp.Function,), {"_latex": _latex, "_mathml_presentation":
                                       _mathml_presentation, "nargs": 2, "fdiff": fdiff})


def check_zero(expr, what: str) -> None:
    """Raise ArithmeticError unless sympy simplifies ``expr`` to 0.

    A derivation calls this for every identity it relies on, so a wrong step stops the
    rendering instead of producing a wrong document.
    """
    if sp.simplify(expr) != 0:
        raise ArithmeticError(f"derivation check failed: {what} (residual {sp.simplify(expr)})")


def geometric_sum(ratio, index=None):
    """sum_{j >= 0} ratio**j, summed by sympy, with its convergence condition.

    Parameters
    ----------
    ratio : sympy expression
    index : sympy Symbol, optional
        The summation index (a fresh one by default).

    Returns
    -------
    value, condition : sympy expressions
        1/(1 - ratio) and the condition under which the series converges.
    """
    j = index if index is not None else sp.Symbol("j", integer=True, nonnegative=True)
    r = sp.Dummy("r", positive=True)
    total = sp.summation(r ** j, (j, 0, sp.oo))
    if isinstance(total, sp.Piecewise):
        (value, cond), *_ = total.args
    else:                                            # pragma: no cover (sympy returns Piecewise)
        value, cond = total, sp.true
    return value.subs(r, ratio), cond.subs(r, ratio)
