"""A TFLite file's several signature defs as one graph (`lite.signatures`): each entry point is imported and
optimised on its own, then its values are renamed `key/<name>` and its nodes joined into one graph that holds a
subgraph per entry point, the default (the one running subgraph 0, else the first) first. A resource variable
is one tensor for every entry point that uses it (LiteRT shares a variable by name across signature runners)."""
from __future__ import annotations

from converter.ir import Graph, Node, SubGraph
from lite.signatures import PREFIX, scoped
from lite.status import NotSupportedError


def _renamed(graph: Graph, key: str) -> dict[str, str]:
    """Every value's name in the joined graph: `key/<name>`, a variable's own name."""
    return {name: name if value.variable else scoped(key, name) for name, value in graph.values.items()}


def join(graphs: dict[str, Graph]) -> Graph:
    """One graph holding every entry point of `graphs` (key -> optimised graph, the default first)."""
    joined = Graph(next(iter(graphs)))
    for key, graph in graphs.items():
        names = _renamed(graph, key)
        for name, value in graph.values.items():
            new = names[name]
            if value.variable and new in joined.values:
                known = joined.values[new]
                if known.shape != value.shape or known.dtype != value.dtype or not (known.const == value.const).all():
                    raise NotSupportedError(f"signature '{key}': variable '{name}' differs from the variable of that "
                                            f"name in another signature ({value.dtype} {list(value.shape)} against "
                                            f"{known.dtype} {list(known.shape)}, or another initial value)")
                continue
            value.name = new
            joined.values[new] = value
        for name, types in graph.source_types.items():
            joined.source_types[names.get(name, scoped(key, name))] = types
        for name, dims in graph.dim_names.items():
            joined.dim_names[names[name]] = dims
        nodes = [Node(n.op, scoped(key, n.name), [names[i] if i else "" for i in n.inputs],
                      [names[o] for o in n.outputs], n.attrs, n.bodies) for n in graph.nodes]
        joined.nodes += nodes
        inputs, outputs = [names[i] for i in graph.inputs], [names[o] for o in graph.outputs]
        joined.inputs += inputs
        joined.outputs += outputs
        joined.subgraphs.append(SubGraph(PREFIX + key, inputs, outputs, nodes))
    return joined
