"""Several chains: the CLI, pooled ensembles, R-hat/ESS across chains, InferenceData."""

import dataclasses
import json
import os
import shutil

import arviz as az
import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import cli
from keras_bnn import diagnostics
from keras_bnn import runs
from keras_bnn.datasets import pipeline
from keras_bnn.runs.config import DEFAULT_STEPS, MIN_EPOCHS, default_epochs

SMALL = ["--num-train", "200", "--num-test", "60", "--batch-size", "50", "--epochs", "6",
         "--burn-in-epochs", "1", "--verbose", "0"]


def _run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def three_chains(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("chains") / "run")
    config = runs.RunConfig(num_train=200, num_test=60, batch_size=50, epochs=6,
                            burn_in_epochs=1, sampler="sghmc", output_dir=run_dir)
    runs.run_chains(config, 3, verbose=0)
    return run_dir


@pytest.mark.slow
def test_cli_trains_and_evaluates_several_chains(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    code, out, err = _run(["train", *SMALL, "--sampler", "sghmc", "--chains", "2",
                           "--output-dir", run_dir], capsys)
    assert code == 0, err
    assert "chain" in out and run_dir in out
    header = next(line for line in out.splitlines() if line.startswith("chain"))
    assert header.split()[:3] == ["chain", "samples", "epochs"]  # a lengthened chain shows
    stores = [kb.SampleStore(os.path.join(run_dir, f"chain-{k}", "samples")) for k in range(2)]
    assert [len(s) for s in stores] == [5, 5]  # epochs 1..5 after one burn-in epoch
    # Own initialisation and noise per chain: the chains differ from the first sample on.
    assert not np.array_equal(stores[0][0].weights[0], stores[1][0].weights[0])
    assert json.load(open(os.path.join(run_dir, "config.json")))["chain"] == 0
    code, out, err = _run(["evaluate", "--run-dir", run_dir], capsys)
    assert code == 0, err
    metrics = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert metrics["num_chains"] == 2 and metrics["num_samples"] == 10
    assert "ensemble of 10" in out and "R-hat" in out
    for space, components in (("function", 60 * 3), ("weight", None)):
        block = metrics["rhat"][space]
        assert block["num_chains"] == 2 and block["num_draws"] == 5
        assert 0.0 <= block["frac_below_1.01"] <= block["frac_below_1.1"] <= 1.0
        assert 0.9 < block["median"] <= block["max"]
        if components:
            assert block["num_components"] + block["num_constant"] == components
    assert kb.PosteriorEnsemble.from_store(run_dir).num_members == 10


@pytest.mark.slow
def test_pooled_ensemble_holds_every_chain_in_order(three_chains):
    stores = [kb.SampleStore(os.path.join(three_chains, f"chain-{k}", "samples"))
              for k in range(3)]
    pooled = kb.PosteriorEnsemble.from_store(stores)
    assert pooled.num_members == sum(len(s) for s in stores) == 15
    same = kb.PosteriorEnsemble.from_store(three_chains)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(pooled._stacks[0]),
                                  keras.ops.convert_to_numpy(same._stacks[0]))
    # Member 5 is chain 1's first sample.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(pooled._stacks[0][5]),
                                  stores[1][0].weights[0])
    assert kb.PosteriorEnsemble.from_store(three_chains, max_samples=3).num_members == 3


@pytest.mark.slow  # 12 s: the default suite stays under its 20 minutes; CI runs both
def test_evaluate_reads_each_sample_once_and_matches_the_store_diagnostics(
        three_chains, tmp_path, monkeypatch):
    """runs.evaluate takes predictions and weight-space R-hat from one
    PosteriorEnsemble: 15 samples, 15 reads; the weight R-hat equals the one
    computed from the stores directly (same draws, so exactly equal)."""
    stores = [kb.SampleStore(os.path.join(three_chains, f"chain-{k}", "samples"))
              for k in range(3)]
    reference = diagnostics.convergence_summary(diagnostics.chain_weights(stores), "weights")
    run_dir = str(tmp_path / "run")
    shutil.copytree(three_chains, run_dir)
    reads = []
    real_read = kb.SampleStore._read

    def counting_read(store, path, weights=True):
        reads.append((path, weights))
        return real_read(store, path, weights=weights)

    monkeypatch.setattr(kb.SampleStore, "_read", counting_read)
    result = runs.evaluate(run_dir)
    weight_reads = [path for path, weights in reads if weights]
    assert len(weight_reads) == len(set(weight_reads)) == result["num_samples"] == 15
    assert result["rhat"]["weight"] == reference


def test_evaluate_uses_one_snapshot_while_a_chain_appends(three_chains, tmp_path, monkeypatch):
    """A chain that appends while ``evaluate`` runs (here: after the ensemble
    is built, before the split points are taken) changes nothing: members,
    chain lengths and R-hat's split points all come from one snapshot."""
    run_dir = str(tmp_path / "run")
    shutil.copytree(three_chains, run_dir)
    chain0 = os.path.join(run_dir, "chain-0", "samples")
    real_predict = kb.PosteriorEnsemble.predict_members
    appended = []

    def predict_then_append(ensemble, *args, **kwargs):
        if not appended:  # the writer: two more samples of chain 0
            for index in (5, 6):
                shutil.copyfile(os.path.join(chain0, "sample-000004.npz"),
                                os.path.join(chain0, f"sample-{index:06d}.npz"))
            appended.append(True)
        return real_predict(ensemble, *args, **kwargs)

    monkeypatch.setattr(kb.PosteriorEnsemble, "predict_members", predict_then_append)
    result = runs.evaluate(run_dir)
    assert appended and len(kb.SampleStore(chain0)) == 7
    assert result["num_samples"] == 15
    for space in ("function", "weight"):
        assert result["rhat"][space]["num_draws"] == 5  # 5 + 5 + 5, not 7 + 5 + 3
    reference = runs.evaluate(three_chains)
    assert result["rhat"] == reference["rhat"] and result["ensemble"] == reference["ensemble"]


def test_to_inference_data_has_weights_and_predictions(three_chains):
    x = np.random.default_rng(0).normal(size=(7, 5)).astype("float32")
    idata = diagnostics.to_inference_data(three_chains, x=x)
    posterior = idata.posterior
    assert dict(posterior.sizes)["chain"] == 3 and dict(posterior.sizes)["draw"] == 5
    store = kb.SampleStore(os.path.join(three_chains, "chain-2", "samples"))
    first = store.build_model().weights[0].path.replace("/", "_")
    np.testing.assert_array_equal(posterior[first].values[2, 4], store[4].weights[0])
    probs = idata.posterior_predictive["probabilities"].values
    assert probs.shape == (3, 5, 7, 3)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    assert len(az.summary(idata, var_names=[first])) == posterior[first].values[0, 0].size
    with pytest.raises(ValueError, match="likelihood"):
        diagnostics.to_inference_data(three_chains, x=x, likelihood="poisson")


def test_chains_of_different_architectures_are_refused(tmp_path, capsys, three_chains):
    other = str(tmp_path / "other")
    runs.run_chains(runs.RunConfig(
        num_train=200, num_test=60, batch_size=50, epochs=2, burn_in_epochs=1,
        sampler="sgld", model_args={"hidden": [8]}, output_dir=other), 1, verbose=0)
    mixed = [os.path.join(three_chains, "chain-0"), os.path.join(other, "chain-0")]
    with pytest.raises(ValueError, match="different architectures"):
        kb.PosteriorEnsemble.from_store(mixed)
    with pytest.raises(ValueError, match="different architectures"):
        diagnostics.to_inference_data(mixed)
    # A run directory whose chain-1 comes from another model: evaluate refuses it.
    run_dir = tmp_path / "mixed_run"
    shutil.copytree(three_chains, run_dir, ignore=shutil.ignore_patterns("chain-2", "*.png"))
    shutil.rmtree(run_dir / "chain-1")
    shutil.copytree(os.path.join(other, "chain-0"), run_dir / "chain-1")
    code, _, err = _run(["evaluate", "--run-dir", str(run_dir)], capsys)
    assert code == 2 and "different architectures" in err and "chain-1" in err


def test_bad_chain_counts_are_named(tmp_path, capsys):
    code, _, err = _run(["train", *SMALL, "--chains", "0", "--output-dir",
                         str(tmp_path / "run")], capsys)
    assert code == 2 and "`--chains` must be an int >= 1" in err
    with pytest.raises(ValueError, match="chains"):
        runs.run_chains(runs.RunConfig(output_dir=str(tmp_path / "x")), -1)


# ------------------------------------------------------------ known answers
def test_identical_law_chains_have_rhat_near_one():
    # 4 chains x 500 iid N(0,1) draws, 40 components: rank-normalised R-hat
    # has sd ≈ 1/sqrt(C·S) ≈ 0.02 around 1 (max-of-two slightly above):
    # all below 1.01 is expected for most seeds, so test the median and max
    # against 1.01 and 1.02, and the bulk ESS against the 2000 iid draws.
    rng = np.random.default_rng(0)
    result = diagnostics.convergence_summary(rng.standard_normal((4, 500, 40)))
    assert abs(result["median"] - 1.0) < 0.005 and result["max"] < 1.02
    assert result["frac_below_1.1"] == 1.0 and result["frac_below_1.01"] > 0.9
    assert 1600 < result["ess_bulk_median"] < 2400 and result["ess_tail_min"] > 1000


def test_identical_chains_have_rhat_one():
    # The same sequence copied into every chain: the between-chain variance is
    # 0, so R-hat = sqrt((S-1)/S) up to the split, ≤ 1 (in particular < 1.01).
    draws = np.random.default_rng(1).standard_normal((1, 400, 10))
    result = diagnostics.convergence_summary(np.repeat(draws, 4, axis=0))
    assert result["max"] < 1.01 and result["frac_below_1.01"] == 1.0


def test_shifted_chains_have_rhat_far_above_one():
    # Chain means 0, 1, 2, 3 with unit within-chain sd: the between/within
    # variance ratio is ~1.7, so R-hat ≈ sqrt(1 + 1.7) ≈ 1.6 ≫ 1.01.
    rng = np.random.default_rng(2)
    chains = rng.standard_normal((4, 500, 20)) + np.arange(4)[:, None, None]
    result = diagnostics.convergence_summary(chains)
    assert result["median"] > 1.3 and result["frac_below_1.1"] == 0.0
    assert result["ess_bulk_median"] < 100


def test_the_verdict_reads_vehtari_et_al_s_rule():
    rng = np.random.default_rng(5)
    # 4 chains x 1000 iid draws: each split R-hat is 1 + O(1/(2n)) with
    # n = 500, sd ≈ 0.0005 (8 split chains), so 1.01 is ~20 sd away; the
    # bulk and tail ESS are ≈ 4000, ten times the 400 asked.
    verdict = diagnostics.convergence_verdict(
        diagnostics.convergence_summary(rng.standard_normal((4, 1000, 20))), "weights")
    assert verdict.converged and verdict.reason.startswith("converged: R-hat < 1.01 for all 20 ")
    assert "(≥ 400 asked)" in verdict.reason
    # Chain means 0..3 (R-hat ≈ 1.6, see above): every component fails.
    shifted = rng.standard_normal((4, 500, 20)) + np.arange(4)[:, None, None]
    verdict = diagnostics.convergence_verdict(diagnostics.convergence_summary(shifted), "weights")
    assert not verdict.converged
    assert verdict.reason.startswith("not converged: R-hat ≥ 1.01 for 100% of the weights")
    # The ESS bound, 100 per chain: 400 passes, 399 does not.
    summary = diagnostics.convergence_summary(rng.standard_normal((4, 1000, 20)))
    assert diagnostics.convergence_verdict(dict(summary, ess_tail_min=400.0)).converged
    verdict = diagnostics.convergence_verdict(dict(summary, ess_bulk_min=399.0))
    assert not verdict.converged and verdict.reason.endswith("ESS down to 399 (≥ 400 asked)")
    # One chain of 6 draws has no R-hat; a constant one nothing to judge.
    assert diagnostics.convergence_verdict(diagnostics.convergence_summary(
        rng.standard_normal((1, 6, 3)))).reason.startswith("not assessed: R-hat is undefined")
    assert diagnostics.convergence_verdict(diagnostics.convergence_summary(
        np.ones((2, 10, 3)))) == (False, "not assessed: none of the components varies")


@pytest.mark.parametrize("summary", [{}, 3, {"num_chains": 4}])
def test_the_verdict_names_a_summary_that_is_not_one(summary):
    # It used to raise a bare KeyError / TypeError.
    with pytest.raises(ValueError, match="convergence_verdict: `summary` must be the dict "
                                         "convergence_summary returns, with keys 'ess_bulk_min'"):
        diagnostics.convergence_verdict(summary)


def test_constant_components_are_left_out_and_bad_shapes_named():
    chains = np.random.default_rng(3).standard_normal((2, 50, 3))
    chains[..., 0] = 1.0
    result = diagnostics.convergence_summary(chains)
    assert result["num_constant"] == 1 and result["num_components"] == 2
    with pytest.raises(ValueError, match="at least 4 draws"):
        diagnostics.convergence_summary(np.zeros((2, 3, 4)), "probabilities")
    with pytest.raises(ValueError, match="non-finite"):
        diagnostics.convergence_summary(np.full((2, 5), np.nan))


def test_many_components_are_subsampled_evenly():
    chains = np.random.default_rng(4).standard_normal((2, 20, 5000))
    chains[..., 1::2] += np.array([0.0, 5.0])[:, None, None]  # odd components disagree
    result = diagnostics.convergence_summary(chains, max_components=100)
    assert (result["num_components"], result["num_scored"]) == (5000, 100)
    # Evenly spaced indices round(k·4999/99) hit odd and even components alike.
    assert 0.3 < result["frac_below_1.1"] < 0.7


@pytest.mark.slow  # two processes, each importing TensorFlow
def test_chains_in_parallel_processes_are_the_sequential_chains(tmp_path, three_chains):
    """Two chains as two `keras-bnn train` processes = the in-process chains 0 and 1.

    Not bitwise: the subprocess has one CPU device, pytest two logical ones,
    so TensorFlow's thread pools sum in another order and the chaotic chain
    amplifies the round-off to ~1e-3 over 30 steps. Another chain (its own
    initialisation and noise) is O(0.1) away, so "same chain" is decided by
    a factor 10 between the two distances.
    """
    config = runs.RunConfig(num_train=200, num_test=60, batch_size=50, epochs=6,
                            burn_in_epochs=1, sampler="sghmc",
                            output_dir=str(tmp_path / "parallel"))
    parallel = runs.run_chains(config, 2, processes=2)
    assert [len(store) for store, _ in parallel] == [5, 5]
    assert len(parallel[1][1]["loss"]) == 6

    def distance(a, b):
        return max(float(np.max(np.abs(x - y))) for x, y in zip(a[-1].weights, b[-1].weights))

    sequential = [kb.SampleStore(os.path.join(three_chains, f"chain-{k}", "samples"))
                  for k in range(2)]
    for k, (store, _) in enumerate(parallel):
        assert distance(store, sequential[k]) < 0.1 * distance(store, sequential[1 - k])
    with pytest.raises(ValueError, match="processes"):
        runs.run_chains(config, 2, processes=0)


def test_chain_processes_pass_on_their_warnings(tmp_path, monkeypatch, capsys):
    """With --processes 2 the chains' NotConvergedWarning was never shown
    (their stderr was read only when one failed); a later evaluate then
    pointed to a warning the user had not seen."""
    from keras_bnn.runs import training

    class Finished:
        returncode = 0

        def __init__(self, argv, **kwargs):
            self.chain = json.load(open(argv[argv.index("--config") + 1]))["chain"]

        def communicate(self):
            return "", (f"keras-bnn: NotConvergedWarning: chain {self.chain} never stationary\n"
                        "I0000 some TensorFlow log line\n")

    monkeypatch.setattr(training.subprocess, "Popen", Finished)
    config = runs.RunConfig(num_train=64, num_test=16, epochs=2, burn_in_epochs=1,
                            output_dir=str(tmp_path / "run"))
    training._train_in_processes([dataclasses.replace(config, chain=k, output_dir=str(
        tmp_path / "run" / f"chain-{k}")) for k in (0, 1)])
    assert capsys.readouterr().err.splitlines() == [
        f"chain {k}: keras-bnn: NotConvergedWarning: chain {k} never stationary" for k in (0, 1)]


def test_train_does_not_depend_on_the_global_seed_left_by_earlier_runs(tmp_path):
    # The data shuffle combines its op seed with TensorFlow's global seed, so
    # `train` must seed before it builds the dataset: otherwise a run's data
    # order (and an SGD baseline's NLL: 0.090 vs 0.151 on digits) depended on
    # whatever had run before in the process.
    final_weights = []
    for leftover in (123, 456):
        keras.utils.set_random_seed(leftover)
        config = runs.RunConfig(num_train=200, num_test=60, batch_size=50, epochs=2,
                                sampler="sgd",
                                output_dir=str(tmp_path / f"run-{leftover}"))
        store, _ = runs.train(config, verbose=0)
        final_weights.append(store[-1].weights)
    for a, b in zip(*final_weights):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("sampler, has_rows", [("sgld", False), ("atmc", True), ("sgd", False)])
def test_train_returns_the_rows_it_writes(tmp_path, sampler, has_rows):
    """TrainResult carries the kinetic-temperature and gradient-noise rows that
    train writes (the CLI prints them without re-reading the JSON); the
    kinetic rows follow Sampler.has_momentum (SGLD and the SGD baseline have
    no momentum), and the result still unpacks as (store, history)."""
    config = runs.RunConfig(num_train=100, num_test=20, batch_size=50, epochs=2,
                            burn_in_epochs=None if sampler == "sgd" else 1, sampler=sampler,
                            output_dir=str(tmp_path / "run"))
    result = runs.train(config, verbose=0)
    store, history = result
    assert store is result.store and history is result.history and len(store) == 1
    for name, rows in (("kinetic_temperatures", result.kinetic_temperatures),
                       ("gradient_noise", result.gradient_noise),
                       ("directional_noise", result.directional_noise)):
        with open(os.path.join(config.output_dir, f"{name}.json")) as handle:
            assert json.load(handle) == rows
    assert bool(result.kinetic_temperatures) == has_rows
    assert bool(result.gradient_noise) == (sampler != "sgd")
    # The noisiest directions' ratio, from the first 100 shuffled training
    # examples (all of them here), batch 50 of n = 100.
    assert bool(result.directional_noise) == (sampler != "sgd")
    if sampler != "sgd":
        report = result.directional_noise
        sizes = (report["num_examples"], report["batch_size"], report["train_size"])
        assert sizes == (100, 50, 100)
        assert report["top"] == sorted(report["top"], reverse=True) and len(report["top"]) == 3
        assert report["top"][0] >= report["mean"] > 0
        assert report["above_limit"] == (report["top"][0] > 0.1)


@pytest.mark.parametrize("sampler, steps", [("sghmc", runs.FULL_BATCH_EPOCH_STEPS),
                                            ("sgd", runs.FULL_BATCH_EPOCH_STEPS), ("hmc", 1)])
def test_a_full_batch_epoch_holds_many_steps_for_a_minibatch_kernel(tmp_path, sampler, steps):
    """With batch_size ≥ n an SG-MCMC (or SGD) epoch repeats the full batch
    FULL_BATCH_EPOCH_STEPS times; HMC keeps one transition an epoch. The
    default length is DEFAULT_STEPS steps either way (at least MIN_EPOCHS)."""
    config = runs.RunConfig(num_train=60, num_test=20, batch_size=60, epochs=2,
                            burn_in_epochs=None if sampler == "sgd" else 1, sampler=sampler,
                            sampler_args={"num_leapfrog_steps": 2} if sampler == "hmc" else {},
                            output_dir=str(tmp_path / "run"))
    runs.train(config, verbose=0)
    with open(os.path.join(config.output_dir, "history.json")) as handle:
        assert len(json.load(handle)["loss"]) == 2
    # The point (SGD) or the sample of the last epoch was taken at step 2·steps.
    store = runs.RunDir(config.output_dir).store()
    assert store[len(store) - 1].metadata["step"] == 2 * steps
    assert runs.steps_per_epoch(config, 60) == steps
    assert runs.steps_per_epoch(dataclasses.replace(config, batch_size=59), 60) == 2
    assert default_epochs(steps) == max(MIN_EPOCHS, -(-DEFAULT_STEPS // steps))


@pytest.mark.parametrize("batch_size, steps", [(30, 2), (60, runs.FULL_BATCH_EPOCH_STEPS)])
def test_a_dataset_of_the_users_own_is_passed_over_once_an_epoch(tmp_path, batch_size, steps):
    """``train(data=...)`` with a finite ``tf.data`` dataset that keras_bnn did
    not build (so no endless stream, ``pipeline.endless`` gives None): ``fit``
    passes over it every epoch, the full batch repeated FULL_BATCH_EPOCH_STEPS
    times, and the run takes the same steps as on its own pipeline."""
    import tensorflow as tf  # noqa: PLC0415 - the user's dataset

    config = runs.RunConfig(num_train=60, num_test=20, batch_size=batch_size, epochs=2,
                            burn_in_epochs=1, sampler="sghmc", output_dir=str(tmp_path / "run"))
    train_ds, test_ds, info = runs.load_data(config)
    x, y = (np.concatenate(parts) for parts in zip(*train_ds.as_numpy_iterator()))
    plain = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)
    assert pipeline.endless(plain) is None
    runs.train(config, verbose=0, data=(plain, test_ds, info))
    with open(os.path.join(config.output_dir, "history.json")) as handle:
        assert len(json.load(handle)["loss"]) == 2
    store = runs.RunDir(config.output_dir).store()
    assert store[len(store) - 1].metadata["step"] == 2 * steps
