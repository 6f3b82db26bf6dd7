"""The frozen trunk of an ensemble's member: run once per call, not once per member.

A member model whose first layers have only weights held once by the
:class:`keras_bnn.PosteriorEnsemble` (the same in every member: a frozen,
pretrained backbone) computes the same tensors in every member up to the
layers that read a sampled weight. :func:`split` finds that trunk in a
Functional member: the layer calls whose weights are all held once and
whose inputs come from the model's inputs through such calls only (of a
layer called in the trunk and after it, none: Keras cannot cut there). The
ensemble runs the trunk once and, per member, only the rest (the *head*, a
Functional built from the trunk's output tensors, which Keras makes its
inputs), so S members cost one backbone and S heads.
"""

import keras


def _trunk_tensors(model, shared_ids):
    """ids of the KerasTensors that every member computes alike.

    A layer called both in the trunk and after a sampled layer (a frozen
    layer used twice) stays out of the trunk: Keras cannot build a head
    whose input is the output of a layer the head calls again ("Output ...
    is not connected to `inputs`").
    """
    excluded = set()  # ids of the operations kept out of the trunk
    while True:
        same, outside = {id(t) for t in model.inputs}, set()
        for depth in sorted(model._nodes_by_depth, reverse=True):  # from the inputs on
            for node in model._nodes_by_depth[depth]:
                if node.is_input:
                    continue
                weights = getattr(node.operation, "weights", ())  # a keras.ops call has none
                if id(node.operation) not in excluded and all(
                        id(w) in shared_ids for w in weights) and all(
                        id(t) in same for t in node.arguments.keras_tensors):
                    same.update(id(t) for t in node.outputs)
                else:
                    outside.add(id(node.operation))
        if outside <= excluded:  # no operation both in the trunk and out of it
            return same
        excluded |= outside


def split(model, shared):
    """The trunk and head of a Functional ``model``, or None when it has no trunk.

    Args:
        model: the member model (a Functional or Sequential Keras model).
        shared: indices in ``model.weights`` of the weights held once.

    Returns:
        ``(trunk, head)``: Functional models sharing ``model``'s layers, with
        ``head(trunk(x))`` = ``model(x)``; or None when no layer call beyond
        the inputs is in the trunk, or every output is (no weight differs
        between the members where it matters), or ``model`` has no graph
        (a subclassed member: it runs whole, once per member).
    """
    graph = getattr(model, "_functional", None) if isinstance(model, keras.Sequential) \
        else model  # a Sequential runs a Functional of its layers
    if not hasattr(graph, "_nodes_by_depth") or not shared:
        return None
    shared_ids = {id(model.weights[j]) for j in shared}
    same = _trunk_tensors(graph, shared_ids)
    if all(id(t) in same for t in graph.outputs):
        return None
    boundary, seen = [], set()
    for nodes in graph._nodes_by_depth.values():
        for node in nodes:
            if node.is_input or all(id(t) in same for t in node.outputs):
                continue
            for tensor in node.arguments.keras_tensors:
                if id(tensor) in same and id(tensor) not in seen:
                    seen.add(id(tensor))
                    boundary.append(tensor)
    input_ids = {id(t) for t in graph.inputs}
    if all(id(t) in input_ids for t in boundary):
        return None
    # Several inputs: the trunk takes them as the member does (a list or a dict).
    inputs = graph.inputs if len(graph.inputs) == 1 else graph.input
    trunk = keras.Model(inputs, boundary, name=f"{model.name}_trunk")
    # A model input that feeds the head directly (beside the trunk's outputs): Keras
    # wires it to a new node of its InputLayer, which left the member unsavable
    # ("could not find node key"); it is given its own node back.
    histories = [(t, t._keras_history) for t in boundary if id(t) in input_ids]
    head = keras.Model(boundary, graph.outputs, name=f"{model.name}_head")
    for tensor, history in histories:
        tensor._keras_history = history
    return trunk, head
