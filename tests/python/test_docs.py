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
