"""Every public function, class and Tensor method of the package documents itself."""
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
