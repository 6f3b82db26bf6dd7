"""``prior="auto"``: the kernel prior chosen on a validation split of the training set.

A prior is a modelling choice, and no one prior is right for every dataset.
Measured at the run defaults (README, "Right by default"): under
He-normal(1) the posterior predictive of digits and wine is underconfident
(ECE 0.09–0.19), while the heavy-tailed Student-t(3, 0.4) that fixes them
makes a few breast_cancer test rows confidently wrong (ensemble NLL 0.17
against 0.14). So the default is a rule, the same for every dataset
(:func:`select_prior`): train one run per candidate of
:data:`~keras_bnn.runs.tables.PRIOR_CANDIDATES` on the first 80 % of a fixed
permutation of the training set, score each by the mean NLL of its own
predictive on the other 20 % (the posterior ensemble of a sampler, the point
of SGD/MAP: each method chooses for itself), and train the run on the whole
training set under the winner. The test split is never read.

It selects where the training set is held in memory (the bundled datasets
and your own ``.npy`` files, dataset "npy"); elsewhere (tensorflow-datasets,
Fashion-MNIST, the synthetic task, data passed in) a run gets
:data:`~keras_bnn.runs.tables.FALLBACK_PRIOR`, and its ``prior_selection.json``
says so.
"""

import dataclasses
import shutil

from keras_bnn import data as data_lib
from keras_bnn.runs import evaluation, fitting
from keras_bnn.runs.build import split_data, steps_per_epoch
from keras_bnn.runs.rundir import RunDir
from keras_bnn.runs.tables import FALLBACK_PRIOR, PRIOR_CANDIDATES, PRIOR_VALIDATION_SPLIT
from keras_bnn.validation import counted


def select_prior(config, verbose=0):
    """Chooses the kernel prior of a ``prior="auto"`` run on a validation split.

    For each ``(prior, scale)`` of :data:`PRIOR_CANDIDATES` one run of
    ``config`` (same sampler, length, seed; ``epochs=None`` counts the
    default length on the training part and, like the run itself, goes on
    up to ``max_epochs`` until the chain has sampled from equilibrium:
    :meth:`keras_bnn.runs.RunConfig.resolve_length`) trains on the training part in
    ``<output_dir>/prior-selection/<prior>-<scale>`` and is scored on the
    held-out part; the choice minimises the validation NLL

    ``NLL_val = -(1/m)·Σ_j log p̄(y_j|x_j)``, ``p̄`` the run's predictive
    (the mean over its samples).

    A candidate run completed before with the same configuration (a
    restarted selection) is scored again, not retrained; an incomplete one,
    or one of another configuration (a run of another seed or sampler that
    stopped in this directory before it wrote its ``config.json``), is
    trained anew. A candidate whose chain
    never reached equilibrium holds no sample and is not scored (its row's
    ``validation_nll`` is None and ``not_scored`` gives the run's reason);
    when no candidate is scored the run takes :data:`FALLBACK_PRIOR`, and
    the report says why.

    Args:
        config: a validated :class:`keras_bnn.runs.RunConfig` with
            ``prior="auto"`` on a bundled dataset.
        verbose: progress-bar verbosity of the candidate runs.

    Returns:
        dict: ``prior``, ``prior_scale`` (the choice), ``reason``,
        ``validation_split``, ``num_validation`` and ``candidates`` (one row
        per candidate with its ``validation_nll``), also written to
        ``prior_selection.json``.
    """
    root = RunDir(config.output_dir)
    data = split_data(config, {"validation_split": PRIOR_VALIDATION_SPLIT,
                               "data_seed": config.seed})
    num_validation = data[2]["num_test"]
    steps = steps_per_epoch(config, data[2]["num_train"])
    length = dataclasses.replace(config).resolve_length(steps)
    most = counted(length.max_epochs, "epoch")
    rows = []
    for prior, scale in PRIOR_CANDIDATES:
        run = root.prior_candidate(prior, scale)
        candidate = dataclasses.replace(config, prior=prior, prior_scale=scale,
                                        output_dir=run.path)
        stored = dataclasses.asdict(dataclasses.replace(candidate).resolve_length(steps))
        if not run.complete or run.holds_other_config(stored):  # another run's candidate
            shutil.rmtree(run.path, ignore_errors=True)
            with fitting.claim(candidate, data=data) as candidate_run:
                fitting.fit_run(candidate_run, candidate, verbose, data=data)
        row = {"prior": prior, "prior_scale": scale, "validation_nll": None}
        result = evaluation.evaluate_sampled(run.path, data=data)
        if result is None:
            row["not_scored"] = run.read_json(run.collection)["reason"]
        else:
            row["validation_nll"] = float(result["ensemble"]["nll"])
        rows.append(row)
    report = {"validation_split": PRIOR_VALIDATION_SPLIT, "num_validation": num_validation,
              "candidates": rows}
    scored = [row for row in rows if row["validation_nll"] is not None]
    if scored:
        best = min(scored, key=lambda row: row["validation_nll"])
        report.update(prior=best["prior"], prior_scale=best["prior_scale"],
                      reason=f"lowest validation NLL ({best['validation_nll']:.4f}) of "
                             f"{len(rows)} candidates on {num_validation} held-out training rows")
        if len(scored) < len(rows):
            report["reason"] += (f" ({len(rows) - len(scored)} collected no sample in "
                                 f"{most})")
    else:
        prior, scale = FALLBACK_PRIOR
        report.update(prior=prior, prior_scale=scale,
                      reason=f"no candidate collected a sample in {most} (none reached "
                             f"equilibrium: see candidates' not_scored): the default "
                             f"{prior}({scale:g})")
    root.write_json(root.prior_selection, report)
    return report


def resolve_prior(config, data=None, verbose=0):
    """``config`` with ``prior="auto"`` replaced by a prior name and scale.

    Selects with :func:`select_prior` on a bundled dataset or the "npy"
    files when no ``data`` is passed; otherwise takes :data:`FALLBACK_PRIOR` and writes why to
    ``prior_selection.json``. A config that names a prior is returned as is.

    Args:
        config: a validated :class:`keras_bnn.runs.RunConfig`.
        data: the ``data`` given to :func:`keras_bnn.runs.train`, if any.
        verbose: progress-bar verbosity of the candidate runs.

    Returns:
        A :class:`keras_bnn.runs.RunConfig` whose ``prior`` is not ``"auto"``.
    """
    if config.prior != "auto":
        return config
    if data is None and (config.dataset in data_lib.BUNDLED or config.dataset == "npy"):
        report = select_prior(config, verbose)
    else:
        prior, scale = FALLBACK_PRIOR
        where = "data passed in" if data is not None else f"dataset {config.dataset!r}"
        report = {"prior": prior, "prior_scale": scale, "candidates": [],
                  "reason": f"no selection for {where} (it needs a bundled dataset's "
                            f"training set in memory): the default {prior}({scale:g})"}
        root = RunDir(config.output_dir)
        root.write_json(root.prior_selection, report)
    return dataclasses.replace(config, prior=report["prior"],
                               prior_scale=report["prior_scale"])
