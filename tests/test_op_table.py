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
    assert all(f"| `{op}` |" in text for op, _, _ in registered())
    assert all(f"| `{op}` | `converter/frontends/onnx/" in text for op in IMPORTERS)


def test_a_rule_emitting_its_own_op_type_lists_only_that_op():
    ops = {op for op, _, _ in registered()}
    assert op_table._emitted(IMPORTERS["Sqrt"], "Sqrt", ops) == ["Sqrt"]
    assert op_table._emitted(IMPORTERS["Min"], "Min", ops) == ["Identity", "Div", "Minimum"]


def test_every_tflite_builtin_is_imported_or_refused_with_a_reason():
    from converter.frontends.tflite.reader import builtin_names
    from converter.frontends.tflite.registry import IMPORTERS as TFLITE
    text = op_table.render()
    assert all(f"| `{op}` | `converter/frontends/tflite/" in text for op in TFLITE)
    refused = dict(op_table._tflite_refused())
    listed = set(refused) | set(TFLITE)
    assert all(name in listed or name.startswith("STABLEHLO_") for name in builtin_names())
    assert "no importer rule for this builtin" not in refused.values()
