"""Lead's fixes of 2026-11-30, each failing on the code before it."""
import dataclasses

from keras_bnn import cli, runs


def test_a_run_whose_samples_were_removed_does_not_blame_equilibrium(tmp_path, capsys):
    """A finished run that collected from epoch 2 on, whose samples/ was then
    emptied: `evaluate` said "its chain did not reach equilibrium in its 3
    epochs (fixed burn-in …)", which its own collection.json contradicts
    (found by cli36). It now says collection began and the store is empty."""
    path = tmp_path / "run"
    config = runs.RunConfig(output_dir=str(path), epochs=3).validate()
    run = runs.RunDir(path)
    run.write_json(run.config, dataclasses.asdict(config))
    store = run.store()  # empty
    run.write_json(run.collection, {"epochs": 3, "start_epoch": 2,
                                    "reason": "fixed burn-in of 2 epochs"})
    run.write_json(run.kinetic_temperatures, [])  # the run is complete
    assert cli.main(["evaluate", "--run-dir", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "did not reach equilibrium" not in err
    assert err.endswith(
        "holds no samples, though its collection began at epoch 2 (fixed burn-in of 2 "
        "epochs): the run ended before a sample was due, or its samples were removed from "
        f"{store.path}.")


def _wired(swap):
    import keras

    import keras_bnn as kb

    inputs = keras.Input((4,))  # Keras numbers the layers' names: each model's differ
    hidden = keras.layers.Dense(4)(inputs)
    joined = keras.layers.Concatenate()([inputs, hidden] if swap else [hidden, inputs])
    return kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(joined)))


def test_a_store_refuses_the_same_layers_wired_otherwise(tmp_path):
    """Concatenate()([h, x]) and ([x, h]): the same layers, configs and weight
    shapes, so one fingerprint, and the second model's samples were appended
    to the first's store without a word (found by store36); an ensemble of
    that store runs the first wiring on the second's weights."""
    import pytest

    import keras_bnn as kb

    store = kb.SampleStore(str(tmp_path / "samples"))
    store.append(_wired(swap=False), step=0)
    store.append(_wired(swap=False), step=1)  # the same wiring, other names
    with pytest.raises(ValueError, match=r"the same layers, wired otherwise \(layer 2 is "
                                         r"called on other layers\)"):
        store.append(_wired(swap=True), step=2)
    assert len(store) == 2
