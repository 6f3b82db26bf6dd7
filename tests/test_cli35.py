"""The ``keras-bnn`` command line as a demanding user drives it: flags that
would be ignored are refused, and what it prints reads right."""

import json

import numpy as np
import pytest

from keras_bnn import cli, console, diagnostics


def _refused(argv, capsys):
    """The error line of a command that must fail with exit code 2."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    return err


@pytest.mark.parametrize("flags, named", [
    (["--burn-in-epochs", "1"], "--burn-in-epochs"),
    (["--burn-in-epochs", "auto"], "--burn-in-epochs"),
    (["--collect-every", "2"], "--collect-every"),
    (["--config", "{config}"], "`collect_every` in --config"),
])
def test_collection_flags_with_sgd_are_refused_not_ignored(flags, named, tmp_path, capsys):
    """Until 2026-11-30 `train --sampler sgd --burn-in-epochs 1` (or
    --collect-every 2) trained and kept the final weights as it does without
    them: the flags were ignored without a word."""
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"collect_every": 2}))
    flags = [flag.format(config=config) for flag in flags]
    for command in (["train"], ["train", "--chains", "2"]):
        err = _refused([*command, "--sampler", "sgd", "--dataset", "wine", "--epochs", "4",
                        *flags, "--output-dir", str(tmp_path / "run")], capsys)
        assert err.startswith(f"keras-bnn: error: {named} sets when a sampler collects "
                              "samples; --sampler sgd collects none"), err
        assert "a deep ensemble is --sampler sgd --chains K" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("num_chains, draws, words", [
    (1, 8, "across 1 chain x 8 draws "), (2, 40, "across 2 chains x 40 draws ")])
def test_rhat_header_counts_chains_and_draws_with_the_right_noun(num_chains, draws, words,
                                                                  capsys):
    """It said "across 1 chain(s) x 51 draws"."""
    rng = np.random.default_rng(0)
    summary = diagnostics.convergence_summary(rng.standard_normal((num_chains, draws, 3)))
    console.print_rhat({"num_chains": num_chains, "likelihood": "categorical",
                        "rhat": {"function": summary, "weight": summary}})
    out = capsys.readouterr().out
    assert f"rank-normalised split R-hat and ESS {words}(Vehtari et al. 2021):" in out
    assert "(s)" not in out
