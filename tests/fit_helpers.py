"""Small models and data shared by the tests of ``fit`` and its worker processes.

Importable from ``tests/`` (pytest puts it on the path) and from a worker in
``tests/workers/`` after ``sys.path.insert(0, <tests>)``: Keras and NumPy only.
"""

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import keras
import numpy as np

import keras_bnn as kb
from keras_bnn import priors

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def three_class_rows(n):
    """``n`` rows of 4 standard-normal features, labels ``0, 1, 2, 0, ...``."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 4)).astype("float32"), np.arange(n, dtype="int32") % 3


def sign_rows(n, features=4):
    """``n`` rows of standard-normal features, label 1 where the first is positive."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, features)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def two_head_model(as_dict, n):
    """Class logits and a Bernoulli logit on 4 features: outputs ``{"cls", "bin"}`` or a
    list of the two, compiled with SGLD (h = 1e-3) for ``train_size=n``."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    heads = [keras.layers.Dense(3, name="cls")(inputs), keras.layers.Dense(1, name="bin")(inputs)]
    losses = [LOSS, keras.losses.BinaryCrossentropy(from_logits=True)]
    if as_dict:
        heads, losses = dict(zip(["cls", "bin"], heads)), dict(zip(["cls", "bin"], losses))
    model = kb.bayesian(keras.Model(inputs, heads))
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3), train_size=n, loss=losses)
    return model


def script_result(tmp_path, name, source):
    """Runs ``source`` as the file ``tmp_path / name`` (warnings name its lines) in a process
    of its own (the TensorFlow backend, this process's path): a subclassed model cannot
    be made after a functional ``BayesianModel`` in one process.

    Returns:
        str: what the script printed after ``"RESULT "`` (it must exit 0 and print it).
    """
    script = tmp_path / name
    script.write_text(source)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).parent.parent,
                          env=dict(os.environ, KERAS_BACKEND="tensorflow",
                                   PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [out for out in done.stdout.splitlines() if out.startswith("RESULT ")]
    assert lines, done.stdout[-2000:]
    return lines[0][len("RESULT "):]


def softmax_regression(sampler, train_size, strategy=None, loss=LOSS):
    """A 4→3 softmax regression with N(0, 1) priors, compiled with ``sampler``
    and ``loss`` (made, with the model, in ``strategy``'s scope when one is given)."""
    keras.utils.set_random_seed(0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        inputs = keras.Input((4,))
        outputs = keras.layers.Dense(3, kernel_regularizer=priors.Normal(0, 1),
                                     bias_regularizer=priors.Normal(0, 1))(inputs)
        model = kb.BayesianModel(inputs, outputs)
        model.compile(sampler=sampler, train_size=train_size, loss=loss)
    return model


class Batches(keras.utils.PyDataset):
    """A ``PyDataset`` of ``(x, y)`` in batches of ``size``, in order."""

    def __init__(self, x, y, size):
        super().__init__()
        self.x, self.y, self.size = x, y, size

    def __len__(self):
        return -(-len(self.x) // self.size)

    def __getitem__(self, index):
        rows = slice(index * self.size, (index + 1) * self.size)
        return self.x[rows], self.y[rows]


class _EpochWeights(keras.callbacks.Callback):
    """The model's weights at each epoch's end (where CollectSamples takes a sample)."""

    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append(self.model.get_weights())


def fit_collecting(model, store, x, y, epochs=3):
    """``model.fit`` (batch 16) collecting a sample every epoch from the first into ``store``.

    Returns:
        The model's weights at each epoch's end, in order: what each sample must hold.
    """
    snapshots = _EpochWeights()
    model.fit(x, y, batch_size=16, epochs=epochs, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0), snapshots])
    return snapshots.weights


def assert_samples_are(store, snapshots):
    """Every sample's weights are, bit for bit and dtype for dtype, the snapshots', in order."""
    assert len(store) == len(snapshots)
    for sample, expected in zip(store, snapshots):
        assert [(w.dtype, w.tobytes()) for w in sample.weights] == [
            (w.dtype, w.tobytes()) for w in expected]


def members_one_by_one(store, x):
    """softmax f(x; θ_s) for each sample s: the store's model given each sample's weights."""
    return weight_sets_one_by_one(store.build_model(), [sample.weights for sample in store], x)


def weight_sets_one_by_one(model, weight_sets, x):
    """softmax f(x; θ_s) for each weight set θ_s, set on ``model`` in turn: [S, N, K]."""
    outputs = []
    for weights in weight_sets:
        model.set_weights(weights)
        outputs.append(keras.ops.convert_to_numpy(keras.ops.softmax(model(x))))
    return np.array(outputs)


def head_sampled(model, count=3):
    """``count`` weight sets of ``model`` that differ in its trainable weights only."""
    rng = np.random.default_rng(1)
    trainable = {id(w) for w in model.trainable_weights}
    return [[w.numpy() + (rng.normal(size=w.shape).astype(w.dtype) if id(w) in trainable else 0)
             for w in model.weights] for _ in range(count)]


def append_at_once(store, models):
    """Each model appended to ``store`` by its own thread, all released at once.

    Returns:
      list: per model, its index if its append succeeded, else the ValueError's message.
    """
    outcomes = [None] * len(models)
    barrier = threading.Barrier(len(models))

    def bind(i):
        barrier.wait()
        try:
            store.append(models[i])
            outcomes[i] = i
        except ValueError as error:
            outcomes[i] = str(error)

    threads = [threading.Thread(target=bind, args=(i,)) for i in range(len(models))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


#: A tagger's data: N sequences of length T over VOCAB token ids (0: padding), K tags.
N, T, VOCAB, K = 16, 6, 12, 3


def tagged_sequences(n=N, length=T, seed=0):
    """Token sequences padded with 0 at the end (2..length tokens); a token's tag: its id mod K."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, length), "int32")
    for row, size in zip(x, rng.integers(2, length + 1, n)):
        row[:size] = rng.integers(1, VOCAB, size)
    return x, (x % K).astype("int32")
