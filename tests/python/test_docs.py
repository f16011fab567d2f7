"""Every public function, class and Tensor method of the package documents itself, and the pages link to what exists."""
import inspect

import tensord


def test_public_names_have_docstrings():
    missing = []
    for name in tensord.__all__:
        obj = getattr(tensord, name)
        if isinstance(obj, tensord.dtype):
            continue
        doc = inspect.getdoc(obj)
        if not doc or len(doc) < 20:
            missing.append(name)
    assert not missing, f"public names without a useful docstring: {missing}"


def test_tensor_methods_have_docstrings():
    missing = []
    for name in dir(tensord.Tensor):
        if name.startswith("_"):
            continue
        doc = inspect.getdoc(getattr(tensord.Tensor, name))
        if not doc:
            missing.append(name)
    assert not missing, f"Tensor members without a docstring: {missing}"


def test_generated_docs_show_the_schemas():
    doc = tensord.add.__doc__
    assert "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in doc
    assert "type promotion" in doc
    assert "matmul: size mismatch" in tensord.matmul.__doc__
    assert "Tensor.sum" in tensord.Tensor.sum.__doc__


def test_op_functions_name_themselves_and_pickle_by_reference():
    """tensord.add, Tensor.add and the operators carry __module__ and
    __qualname__ as Python functions do, so pickle and copy find the very same
    object again (as they do torch.add); one made by hand cannot be pickled."""
    import copy
    import pickle
    ops = [tensord.add, tensord.zeros, tensord.Tensor.add, tensord.Tensor.sum, tensord.Tensor.__add__,
           tensord.Tensor.__radd__, tensord.Tensor.__eq__]
    for f in ops:
        assert f.__module__ == "tensord", f
        assert eval(f.__qualname__, {"Tensor": tensord.Tensor, **vars(tensord)}) is f, f.__qualname__
        for protocol in (2, pickle.HIGHEST_PROTOCOL):
            assert pickle.loads(pickle.dumps(f, protocol=protocol)) is f, (f, protocol)
        assert copy.deepcopy(f) is f
    assert tensord.Tensor.__radd__.__name__ == "__radd__"
    # Every Python-level member of Tensor, whichever module defined it.
    import types
    members = [m for m in vars(tensord.Tensor).values() if isinstance(m, (types.FunctionType, tensord._C.OpFunction))]
    assert len(members) > 100
    unpicklable = []
    for m in members:
        try:
            if pickle.loads(pickle.dumps(m)) is not m:
                unpicklable.append(m.__qualname__)
        except Exception as e:  # noqa: BLE001 - collected and reported together
            unpicklable.append(f"{getattr(m, '__qualname__', m)}: {e}")
    assert not unpicklable, unpicklable
    bare = tensord._C.OpFunction("add", "function")
    try:
        pickle.dumps(bare)
    except TypeError as e:
        assert "cannot pickle tensord op add" in str(e)
    else:
        raise AssertionError("an OpFunction without a __qualname__ pickled")


def test_the_readme_and_docs_pages_link_to_what_exists():
    """Every relative link of README.md and docs/*.md names a file of the repository."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    assert len(pages) > 1, "no docs/ pages"
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(root)} -> {target}")
    assert not broken, f"links to nothing: {broken}"
