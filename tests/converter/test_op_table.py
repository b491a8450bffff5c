"""docs/ops.md is generated from the registries and must match them."""
from converter import op_table
from converter.frontends.onnx.registry import IMPORTERS
from lite.kernel import registered


def test_the_op_table_is_current():
    expected = op_table.render()
    current = op_table.OUTPUT.read_text() if op_table.OUTPUT.exists() else ""
    assert current == expected, f"docs/ops.md is stale: run `{op_table.COMMAND}` and commit the result"


def test_every_kernel_and_importer_rule_has_a_row():
    text = op_table.render()
    assert all(f"| `{op}` |" in text for op, *_ in registered())
    assert all(f"| `{op}` | `converter/frontends/onnx/" in text for op in IMPORTERS)


def test_a_rule_emitting_its_own_op_type_lists_only_that_op():
    ops = {op for op, *_ in registered()}
    assert op_table._emitted(IMPORTERS["Sqrt"], "Sqrt", ops) == ["Sqrt"]
    assert op_table._emitted(IMPORTERS["Min"], "Min", ops) == ["Identity", "Div", "Minimum"]


def test_every_tflite_builtin_is_imported_or_refused_with_a_reason():
    from converter.frontends.tflite.reader import builtin_names
    from converter.frontends.tflite.registry import IMPORTERS as TFLITE
    text = op_table.render()
    assert all(f"| `{op}` | `converter/frontends/tflite/" in text for op in TFLITE)
    refused = dict(op_table._tflite_refused())
    from converter.frontends.tflite.variables import RESOURCE_OPS
    assert all(f"| `{op}` | `converter/frontends/tflite/variables.py`" in text for op in RESOURCE_OPS)
    listed = set(refused) | set(TFLITE) | set(RESOURCE_OPS)
    assert all(name in listed or name.startswith("STABLEHLO_") for name in builtin_names())
    assert "no importer rule for this builtin" not in refused.values()


def test_compiled_siblings_have_their_column():
    rows: dict[str, str] = {}
    for line in op_table.render().splitlines():        # our ops come first (ONNX ops of the same name follow)
        if line.startswith("| `"):
            rows.setdefault(line.split(" | ")[0], line)
    assert "`lite/kernels/compiled/conv2d.py` (float32), `lite/kernels/compiled/int8_conv2d.py` (int8)" in \
        rows["| `Conv2D`"]
    assert rows["| `LogSoftmax`"].split(" | ")[4] == "—"


def test_the_tests_column_finds_test_files_at_any_depth(tmp_path, monkeypatch):
    """By the op's name in quotes or a kernel module's name, wherever the test file lies under tests/."""
    (tmp_path / "lite" / "kernels").mkdir(parents=True)
    (tmp_path / "lite" / "kernels" / "test_softmax.py").write_text("")                  # named after the module
    (tmp_path / "test_models.py").write_text('ops = ["Softmax"]\n')                      # names the op
    (tmp_path / "test_imports.py").write_text("from lite.kernels import conv2d, softmax\n")
    (tmp_path / "test_other.py").write_text('ops = ["SoftmaxGrad"]\n')
    monkeypatch.setattr(op_table, "TESTS", tmp_path)
    op_table._test_texts.cache_clear()
    try:
        row = op_table._kernels()["Softmax"]
        assert op_table._tests("Softmax", row) == ["lite/kernels/test_softmax.py", "test_imports.py",
                                                   "test_models.py"]
    finally:
        op_table._test_texts.cache_clear()
