"""What README.md says a user sees, checked where a first read found it wrong.

"Resume": Ctrl-C stops ``keras-bnn train`` with one line that says how to go
on. Stopped while ``--prior auto`` chose the prior (before training began),
the line said "continue the run with the same command and --resume", and
that command then failed: ``--resume`` refuses a run stopped there (measured
on wine, 2026-11-30: the interrupt after 25 s, then exit 2 "the run ... was
stopped while it chose its prior ...: run the same command again without
--resume").
"""

import os
import types

import pytest

from keras_bnn import cli


def _interrupt_train(monkeypatch, write):
    """``keras-bnn train`` whose run writes ``write(run_dir)`` and then gets Ctrl-C."""
    def train(config, **_):
        os.makedirs(config.output_dir, exist_ok=True)
        write(config.output_dir)
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_runs", lambda: types.SimpleNamespace(train=train))


@pytest.mark.parametrize("stage, resumable", [("prior-selection", False),
                                              ("config.json", True), (None, False)])
def test_ctrl_c_advice_is_a_command_that_goes_on(monkeypatch, capsys, tmp_path, stage,
                                                 resumable):
    run_dir = str(tmp_path / "run")

    def write(directory):
        if stage == "prior-selection":
            os.makedirs(os.path.join(directory, stage))
        elif stage == "config.json":
            with open(os.path.join(directory, stage), "w") as file:
                file.write("{}")
    _interrupt_train(monkeypatch, write)
    assert cli.main(["train", "--dataset", "wine", "--output-dir", run_dir]) == 130
    err = capsys.readouterr().err
    assert err.startswith("keras-bnn: interrupted.") and err.count("\n") == 1
    assert ("the same command and --resume" in err) is resumable, err
    assert ("without --resume" in err) is not resumable, err
    assert ("prior" in err) is (stage == "prior-selection"), err


def test_resume_refuses_what_the_advice_says_to_rerun(monkeypatch, capsys, tmp_path):
    """The advice and ``--resume`` agree: a run stopped in its prior selection is
    refused by ``--resume``, naming the command without it."""
    run_dir = str(tmp_path / "run")
    _interrupt_train(monkeypatch,
                     lambda directory: os.makedirs(os.path.join(directory, "prior-selection")))
    assert cli.main(["train", "--dataset", "wine", "--output-dir", run_dir]) == 130
    assert "without --resume" in capsys.readouterr().err
    assert cli.main(["train", "--resume", "--output-dir", run_dir]) == 2
    assert "without --resume" in capsys.readouterr().err
