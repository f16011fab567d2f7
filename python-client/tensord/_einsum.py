"""tensord.einsum: Einstein summation composed of table ops (permute,
reshape, index, sum, matmul), so it runs in the daemon op by op, is
differentiated through those ops, and works on meta tensors with no daemon.

    tensord.einsum("bhqd,bhkd->bhqk", q, k)     # attention scores
    tensord.einsum("ij->ji", x)                 # a view, as in PyTorch
"""
from . import _C
from ._tensor import Tensor

_ELLIPSIS = "..."


def _err(equation, what):
    return RuntimeError(f"einsum(): {what} (equation '{equation}')")


def _parse_term(equation, term, start):
    """Labels of one operand's subscripts: letters, plus None for "..." once."""
    labels, i = [], 0
    while i < len(term):
        if term.startswith(_ELLIPSIS, i):
            if None in labels:
                raise _err(equation, f"found more than one ellipsis ('...') in subscripts '{term}'")
            labels.append(None)
            i += 3
            continue
        c = term[i]
        if not (("a" <= c <= "z") or ("A" <= c <= "Z")):
            raise _err(equation, f"invalid subscript given at index {start + i} in the equation string, "
                                 "subscripts must be in [a-zA-Z]")
        labels.append(c)
        i += 1
    return labels


def _expand_ellipsis(equation, labels, t, n):
    """Replaces None (the ellipsis) by the labels (0, k), (1, k)... of the
    operand's broadcast dims, right-aligned against the widest ellipsis."""
    explicit = len(labels) - (1 if None in labels else 0)
    if None not in labels:
        if explicit != t.dim():
            raise _err(equation, f"the number of subscripts in the equation ({explicit}) does not match the "
                                 f"number of dimensions ({t.dim()}) for operand {n} and no ellipsis was given")
        return list(labels)
    if explicit > t.dim():
        raise _err(equation, f"the number of subscripts in the equation ({explicit}) is more than the number "
                             f"of dimensions ({t.dim()}) for operand {n}")
    k = t.dim() - explicit
    at = labels.index(None)
    return labels[:at] + [("...", j, k) for j in range(k)] + labels[at + 1:]


def _ell_key(label, width):
    """Ellipsis dims of different operands align from the right."""
    if isinstance(label, tuple):
        _, j, k = label
        return ("...", width - k + j)
    return label


def _diagonal(t, labels):
    """Takes the diagonal over each label repeated within one operand ("ii->i")
    as torch.einsum does: ``t.diagonal(0, d0, d1)`` moved back to the first
    occurrence's position, so the result is a view of the operand."""
    while True:
        seen, pair = {}, None
        for d, lab in enumerate(labels):
            if lab in seen:
                pair = (seen[lab], d)
                break
            seen[lab] = d
        if pair is None:
            return t, labels
        d0, d1 = pair
        t = _C.call_any("diagonal", t, 0, d0, d1)               # [rest..., n]
        n = t.dim()
        t = t.permute(list(range(d0)) + [n - 1] + list(range(d0, n - 1)))
        labels = [lab for d, lab in enumerate(labels) if d != d1]


def _sum_out(t, labels, drop):
    """Sums `t` over the labels in `drop` with sum's dtype rule (integers and
    bool give int64), as torch.einsum's own summations do."""
    dims = [d for d, lab in enumerate(labels) if lab in drop]
    if not dims:
        return t, labels
    t = t.sum(dims, False)
    return t, [lab for lab in labels if lab not in drop]


def _prod(sizes):
    p = 1
    for s in sizes:
        p *= s
    return p


def _contract(equation, a, la, b, lb, keep):
    """a (labels la) times b (labels lb), summing over the shared labels not in
    `keep`; the result's labels are batch + left + right. Uses one matmul on
    [batch..., L, K] @ [batch..., K, R] (batch dims broadcast), or a
    broadcasting multiply when nothing is contracted."""
    size_a = dict(zip(la, a.shape))
    size_b = dict(zip(lb, b.shape))
    shared = [lab for lab in la if lab in size_b]
    batch = [lab for lab in shared if lab in keep]
    contracted = [lab for lab in shared if lab not in keep]
    # A contracted label of size 1 on one side: sum the other side first (broadcasting).
    for lab in contracted:
        if size_a[lab] != size_b[lab]:
            if size_a[lab] == 1:
                b = b.sum([lb.index(lab)], True)
                size_b[lab] = 1
            elif size_b[lab] == 1:
                a = a.sum([la.index(lab)], True)
                size_a[lab] = 1
    for lab in shared:
        if size_a[lab] != size_b[lab] and size_a[lab] != 1 and size_b[lab] != 1:
            name = "..." if isinstance(lab, tuple) else lab
            raise _err(equation, f"subscript {name} has size {size_a[lab]} for one operand and size "
                                 f"{size_b[lab]} for another, which do not broadcast")
    left = [lab for lab in la if lab not in size_b]
    right = [lab for lab in lb if lab not in size_a]
    ba = [size_a[lab] for lab in batch]
    bb = [size_b[lab] for lab in batch]
    lsz = [size_a[lab] for lab in left]
    rsz = [size_b[lab] for lab in right]
    if not contracted:
        # Nothing to sum: a broadcasting multiply (mul's type promotion, as PyTorch).
        pa = a.permute([la.index(lab) for lab in batch + left]).reshape(ba + lsz + [1] * len(rsz))
        pb = b.permute([lb.index(lab) for lab in batch + right]).reshape(bb + [1] * len(lsz) + rsz)
        return _C.call_any("mul.Tensor", pa, pb), batch + left + right
    if a.dtype != b.dtype:
        raise _err(equation, f"expected scalar type {a.dtype._name} but found {b.dtype._name}: the operands of a "
                             "contraction must have the same dtype")
    if a.dtype._name == "bool":
        raise _err(equation, "a contraction of bool operands is not implemented for 'Bool'")
    pa = a.permute([la.index(lab) for lab in batch + left + contracted])
    pb = b.permute([lb.index(lab) for lab in batch + contracted + right])
    k = _prod(size_a[lab] for lab in contracted)
    ma = pa.reshape(ba + [_prod(lsz), k])
    mb = pb.reshape(bb + [k, _prod(rsz)])
    out = _C.call_any("matmul", ma, mb)
    out_batch = [max(x, y) if min(x, y) != 0 else 0 for x, y in zip(ba, bb)]
    out = out.reshape(out_batch + lsz + rsz)
    return out, batch + left + right


def einsum(equation, *operands):
    """Einstein summation over the operands' dims named by ``equation``, as
    ``torch.einsum`` (PyTorch 1.13): ``"ij,jk->ik"`` (matrix product),
    ``"bij,bjk->bik"``, ``"bhqd,bhkd->bhqk"``, ``"i,i->"``, ``"i,j->ij"``,
    ``"ij->ji"`` (a view), ``"ii->i"`` (the diagonal, a view as in torch), ``"ij->"``; without ``->``
    the output has the labels that occur once, in alphabetical order
    (uppercase first); ``...`` stands for broadcast dims (right-aligned,
    NumPy broadcasting across operands, first in an implicit output).
    Subscripts are letters a-z, A-Z. Operands may also be passed as one list.

    Shapes: each operand has as many dims as its subscripts (the ellipsis
    takes the rest); a label's size must agree across operands or be 1
    (broadcast). dtype, as torch.einsum: a pair of operands with a summed
    label is a matrix product and must share one dtype (not bool); a pair
    with nothing summed is a multiply with mul's type promotion; a label
    summed within one operand uses sum's rule (integers and bool give int64),
    so an integer contraction can meet mixed dtypes exactly where
    torch.einsum does. The result is composed of table ops (permute,
    reshape, index, sum, mul, matmul), so it is differentiable and works on
    meta tensors.

    Errors: RuntimeError naming einsum and the equation for a bad subscript,
    a subscript count that does not match an operand's dims, an output
    subscript that no input has or that repeats, a wrong number of operands,
    sizes that do not broadcast, and mixed dtypes in a contraction;
    TypeError when an operand is not a tensord.Tensor."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): the equation must be a str, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for n, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum(): operand {n} must be a tensord.Tensor, got {type(t).__name__}")
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    if "-" in lhs or ">" in lhs or "-" in rhs or ">" in rhs:
        raise _err(equation, "found '->' more than once or a stray '-' or '>'")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        more = "more" if len(operands) > len(terms) else "fewer"
        raise _err(equation, f"{more} operands were provided than specified in the equation "
                             f"({len(operands)} operands, {len(terms)} subscript groups)")
    if not operands:
        raise _err(equation, "must provide at least one operand")

    starts, pos = [], 0
    for term in terms:
        starts.append(pos)
        pos += len(term) + 1
    parsed = [_parse_term(equation, term, s) for term, s in zip(terms, starts)]
    expanded = [_expand_ellipsis(equation, labels, t, n) for n, (labels, t) in enumerate(zip(parsed, operands))]
    width = max([sum(1 for lab in labels if isinstance(lab, tuple)) for labels in expanded] + [0])
    labels_of = [[_ell_key(lab, width) for lab in labels] for labels in expanded]
    ell = [("...", j) for j in range(width)]

    # The output's labels.
    if arrow:
        out_terms = _parse_term(equation, rhs, len(lhs) + 2)
        out_labels = []
        for lab in out_terms:
            if lab is None:
                out_labels.extend(ell)
                continue
            if lab in out_labels:
                raise _err(equation, f"output subscript {lab} appears more than once in the output")
            if not any(lab in labels for labels in labels_of):
                raise _err(equation, f"output subscript {lab} does not appear in the equation for any input "
                                     "operand")
            out_labels.append(lab)
    else:
        counts = {}
        for labels in labels_of:
            for lab in labels:
                if isinstance(lab, str):
                    counts[lab] = counts.get(lab, 0) + 1
        out_labels = ell + sorted(lab for lab, c in counts.items() if c == 1)

    # A label repeated within an operand (a diagonal) needs equal sizes.
    for n, (labels, t) in enumerate(zip(labels_of, operands)):
        for lab in set(labels):
            dims = [d for d, x in enumerate(labels) if x == lab]
            if len(dims) > 1 and len({t.shape[d] for d in dims}) > 1:
                raise _err(equation, f"subscript {lab} is repeated for operand {n} but the sizes don't match, "
                                     f"{' != '.join(str(t.shape[d]) for d in dims)}")
    # Label sizes must agree (or be 1) across operands.
    sizes = {}
    for n, (labels, t) in enumerate(zip(labels_of, operands)):
        for lab, s in zip(labels, t.shape):
            prev = sizes.get(lab)
            if prev is not None and prev != s and prev != 1 and s != 1:
                name = "..." if isinstance(lab, tuple) else lab
                raise _err(equation, f"subscript {name} has size {s} for operand {n} which does not broadcast "
                                     f"with previously seen size {prev}")
            if prev is None or prev == 1:
                sizes[lab] = s

    # Per operand: diagonals, then (below) sum the labels no one else needs.
    cur = []
    for labels, t in zip(labels_of, operands):
        t, labels = _diagonal(t, labels)
        cur.append((t, labels))

    def needed_after(i):
        need = set(out_labels)
        for _, labels in cur[i:]:
            need.update(labels)
        return need

    t, labels = cur[0]
    t, labels = _sum_out(t, labels, set(labels) - needed_after(1))
    for i in range(1, len(cur)):
        b, lb = cur[i]
        keep = needed_after(i + 1)
        b, lb = _sum_out(b, lb, set(lb) - keep - set(labels))
        t, labels = _sum_out(t, labels, set(labels) - keep - set(lb))
        t, labels = _contract(equation, t, labels, b, lb, keep)

    # Broadcast dims of size 1 that are summed away, then the output order.
    t, labels = _sum_out(t, labels, set(labels) - set(out_labels))
    perm = [labels.index(lab) for lab in out_labels]
    if perm != list(range(len(perm))) or t is operands[0]:
        t = t.permute(perm)   # a view, never the operand object itself
    return t
