"""The README's examples run as printed and give a posterior.

They are the first code a user runs: "A first example" (the synthetic task,
no step size, collection from equilibrium, export), "Your own model"
(``kb.bayesian`` on a functional Keras model, on scikit-learn's digits) and the prior
predictive check of "Checking a prior", and the SGHMC config of the
"Reference workflow" (one chain of it). Each block is read
from README.md and executed unchanged in a temporary directory. Until
2026-11-27 the first example trained 2000 steps, which ended before the
equilibrium test and the second noise measurement were done: it collected no
sample and ``PosteriorEnsemble.from_store`` raised.
"""

import importlib.util
import json
import re
import types
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.datasets.bundled import bundled_arrays

README = Path(__file__).parent.parent / "README.md"


def readme_block(heading, after=None):
    """The first ```python block under the README's heading ``heading`` (``## …``, ``### …``),
    or after the text ``after`` in that section."""
    text = README.read_text()
    section = text[re.search(rf"^#+ {re.escape(heading)}$", text, re.M).start():]
    section = section[section.index(after):] if after else section
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_block(code, tmp_path, monkeypatch, namespace=None):
    """Executes ``code`` in ``tmp_path``; returns its namespace and the warnings raised."""
    monkeypatch.chdir(tmp_path)
    namespace = dict(namespace or {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    return namespace, [w.category for w in caught]


@pytest.mark.slow  # 1-2 min: the default suite stays under its 20 minutes; CI runs both
def test_the_first_example_collects_samples_and_exports(tmp_path, monkeypatch):
    ns, warned = run_block(readme_block("A first example"), tmp_path, monkeypatch)
    assert kb.NotConvergedWarning not in warned
    assert ns["collect"].started_epoch is not None
    assert len(ns["store"]) > 0
    probs = np.asarray(ns["probs"])
    assert probs.shape == (ns["info"]["num_test"], ns["info"]["num_classes"])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert list((tmp_path / "saved_models" / "first").glob("*/saved_model.pb"))


@pytest.mark.slow  # 1-2 min, as above
def test_the_own_model_example_samples_a_functional_model(tmp_path, monkeypatch):
    keras.utils.set_random_seed(0)  # the block leaves the seed to the user: fixed here
    ns, warned = run_block(readme_block("Your own model"), tmp_path, monkeypatch)
    x_val, y_val = ns["x_val"], ns["y_val"]
    assert kb.NotConvergedWarning not in warned
    assert kb.MissingPriorWarning not in warned
    assert ns["collect"].started_epoch is not None
    probs = np.asarray(ns["ensemble"].predict(x_val, verbose=0))
    assert probs.shape == (len(x_val), 10)
    # A posterior on digits, not a broken one: chance is 0.1 and NLL log(10) = 2.3.
    assert float(np.mean(np.argmax(probs, axis=1) == y_val)) > 0.8
    assert kb.metrics.evaluate_probs(probs, y_val)["nll"] < 1.0
    # "Noise by direction" measures this model after its fit (the block continues this one).
    ns, _ = run_block(readme_block("Noise by direction"), tmp_path, monkeypatch, ns)
    top, mean = list(ns["report"]["top"]), float(ns["report"]["mean"])
    assert len(top) == 3 and top == sorted(top, reverse=True) and 0 < mean < top[-1]


@pytest.mark.slow  # 17 s (2 cores): 150 epochs and an export
def test_the_bayesian_last_layer_samples_the_head_on_a_frozen_trunk(tmp_path, monkeypatch):
    """The "A Bayesian last layer" block, on the trunk and data of
    examples/bayesian_last_layer.py (the names the block leaves to the user)."""
    spec = importlib.util.spec_from_file_location(
        "bayesian_last_layer", README.parent / "examples" / "bayesian_last_layer.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    (x_train, y_train), (x_test, y_test), _ = bundled_arrays("digits")
    trunk = example.pretrained_trunk(x_train, y_train, types.SimpleNamespace(
        seed=0, batch_size=64, pretrain_epochs=30))
    frozen = [w.numpy().copy() for layer in trunk for w in layer.weights]
    ns, warned = run_block(
        readme_block("Your own model", after="**A Bayesian last layer.**"), tmp_path,
        monkeypatch, {"pretrained_trunk": trunk, "x_train": x_train, "y_train": y_train,
                      "x_test": x_test, "y_test": y_test})
    assert kb.NotConvergedWarning not in warned and kb.MissingPriorWarning not in warned
    assert len(ns["store"]) > 0 and (tmp_path / "runs" / "bll" / "samples" / "shared.npz").exists()
    # The trunk is not sampled: its weights are the pretrained ones, bit for bit.
    assert all(np.array_equal(w.numpy(), f)
               for w, f in zip((w for layer in trunk for w in layer.weights), frozen))
    # Chance is accuracy 0.1 and NLL log 10 = 2.3 on the 500 test images.
    assert float(np.mean(np.argmax(ns["probs"], axis=1) == y_test)) > 0.8
    assert kb.metrics.evaluate_probs(ns["probs"], y_test)["nll"] < 1.0
    assert list((tmp_path / "saved_models" / "bll").glob("*/saved_model.pb"))


def test_the_prior_predictive_check_shows_the_confident_prior(tmp_path, monkeypatch):
    """The README says that under N(0, I) "each network picks one class": the
    largest class share P[s].max() is near 1 for most prior draws."""
    ns, _ = run_block(readme_block("Checking a prior: the prior predictive"), tmp_path,
                      monkeypatch)
    shares = np.asarray(ns["P"])
    assert shares.shape == (10, 10)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0, rtol=1e-5)
    assert np.mean(shares.max(axis=1) > 0.9) > 0.5


def reference_workflow_configs():
    """The JSON configs (``name.json: {...}``) of the README's "Reference workflow"."""
    text = README.read_text()
    section = text[re.search(r"^## Reference workflow", text, re.M).start():]
    block = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    return {name: json.loads(body) for name, body in
            re.findall(r"^(\w+)\.json:\s+(\{.*?\})\s*$", block, re.M | re.S)}


@pytest.mark.slow  # 28 s, as the first two examples
def test_the_reference_workflow_samples_after_the_warm_up_and_lengthens_a_late_chain(
        tmp_path):
    """The README's SGHMC config at the defaults, chain 2 of ``--chains 4``:
    none of its samples is in the warm-up (the config of the README before
    2026-11-27 ended its burn-in 400 steps into the 1000-step warm-up), and,
    stationary late (epoch 190 here), it trains on past its 200 epochs until
    it has sampled 50 (a quarter), one sample every 2 epochs. The equilibrium
    epoch depends on the chain's last bits (another CPU's float round-off can
    move it), so the length is checked against the start it reports."""
    configs = reference_workflow_configs()
    assert set(configs) == {"hmc", "sghmc"}
    kb.runs.RunConfig.from_dict(configs["hmc"])  # a valid config
    config = kb.runs.RunConfig.from_dict(
        dict(configs["sghmc"], chain=2, output_dir=str(tmp_path / "chain-2")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = kb.runs.train(config, verbose=0)
    assert not [w for w in caught if w.category in (kb.WarmupSampleWarning,
                                                    kb.NotConvergedWarning)]
    start = result.collection["start_epoch"]
    assert start is not None and start > 150  # late: 190 on this machine
    epochs = max(200, start + 50)
    assert (result.collection["epochs"], len(result.store)) == (epochs, (epochs - start) // 2)
    assert len(result.store) >= 25
