"""Training a run: one chain in this process, several chains, and resuming.

:func:`train` writes a :class:`keras_bnn.runs.RunDir`; :func:`run_chains`
writes one per chain, in this process or as concurrent ``keras-bnn train``
processes. Both resolve ``prior="auto"`` (:mod:`~keras_bnn.runs.selection`)
in the locked run directory, then train with :mod:`~keras_bnn.runs.fitting`.
"""

import dataclasses
import os
import subprocess
import sys
import tempfile

from keras_bnn import console
from keras_bnn.runs import fitting, selection
from keras_bnn.runs.build import check_data_files
from keras_bnn.runs.rundir import RunDir
from keras_bnn.validation import check_int, counted


def train(config, verbose=1, resume=False, data=None):
    """Trains a model by sampling (or SGD) and stores the samples.

    The run is backed up at an epoch's end at most every
    :data:`~keras_bnn.runs.checkpoints.BACKUP_INTERVAL` seconds
    (:class:`keras_bnn.runs.RunBackup` in ``output_dir/backup``, removed
    when the run completes), so a killed
    run continues with ``resume=True``: from the last complete backup, with
    the same chain state and step counter, the same data order (a pure
    function of (seed, epoch), :func:`keras_bnn.datasets.pipeline.data_epoch`)
    and no sample duplicated or dropped
    (:class:`keras_bnn.callbacks.CollectSamples`): the samples of the
    uninterrupted run. The run directory is locked while training
    (:class:`keras_bnn.durable.DirectoryLock`): one writer at a time.

    With ``prior="auto"`` the prior is first chosen on a validation split
    of the training set (:func:`keras_bnn.runs.selection.resolve_prior`),
    and the stored ``config.json`` names the choice.

    Args:
        config: a validated :class:`RunConfig`.
        verbose: Keras progress-bar verbosity.
        resume: continue the run in ``config.output_dir``.
        data: ``(train_ds, test_ds, info)`` to use instead of loading
            ``config.dataset`` (e.g. from :func:`keras_bnn.runs.arrays_data`).

    Returns:
        A :class:`TrainResult` (``store, history = train(...)`` unpacks it).

    Raises:
        FileExistsError: if ``output_dir`` already holds a run (or chains)
            and ``resume`` is False.
        ValueError: if ``resume`` is True and the run is complete, or is a
            sweep's run on a validation split and ``data`` is None.
        keras_bnn.durable.InUseError: if another process trains into
            ``output_dir`` (the message names its pid).
        OSError: if a file cannot be written (a full disk: the message
            names the file; what was written before is kept).
    """
    with fitting.claim(config, resume, data) as run:
        config = selection.resolve_prior(config, data, verbose)  # prior="auto": before the seed
        return fitting.fit_run(run, config, verbose, resume, data)


def run_chains(config, chains, verbose=1, processes=1, resume=False):
    """Trains ``chains`` independent chains of one configuration.

    Chain k is :func:`train` with ``chain=k`` (its own initialisation and
    sampler noise, :func:`keras_bnn.runs.chain_seed`; the same data) in
    ``<output_dir>/chain-k``; ``<output_dir>/config.json`` holds the shared
    configuration. ``keras-bnn evaluate --run-dir <output_dir>`` then pools
    the chains and reports R-hat/ESS across them. With ``processes > 1`` the
    chains run as that many concurrent ``keras-bnn train`` processes (each
    with its own TensorFlow runtime; worth it when the cores outnumber what
    one chain uses), else one after another in this process.

    Args:
        config: a :class:`RunConfig` (``output_dir`` is the run directory).
        chains: K ≥ 1.
        verbose: Keras progress-bar verbosity of each chain (in-process).
        processes: concurrent chain processes, ≥ 1.
        resume: continue the killed run of ``chains`` chains in ``output_dir``:
            its complete chains are kept, a chain that started continues from
            its backup (:func:`train` with ``resume=True``) and one that did
            not start trains.

    Returns:
        List of ``(store, logs)``, one per chain: its
        :class:`keras_bnn.SampleStore` and its ``History.history`` dict (also
        in ``chain-k/history.json``).

    Raises:
        ValueError: for ``chains`` or ``processes`` < 1 or an invalid config;
            with ``resume``, for a run whose chains are all complete.
        FileExistsError: if ``output_dir`` already holds a run (of one
            chain or of chains, or a sweep) and ``resume`` is False.
        ChildProcessError: if a chain process fails (with the end of its
            stderr).
        keras_bnn.durable.InUseError: if another process writes into
            ``output_dir``.
    """
    chains = check_int(chains, "chains", 1)
    processes = check_int(processes, "processes", 1)
    config = dataclasses.replace(config.validate(), chain=0)
    top = RunDir(config.output_dir)
    with fitting.refused_leaves_nothing(top.path, lambda: os.path.isdir(top.prior_candidates)
                                        or any(chain.started for chain in top.chains())):
        return _run_chains(config, chains, verbose, processes, resume)


def _run_chains(config, chains, verbose, processes, resume):
    """:func:`run_chains` in the locked run directory."""
    top = RunDir(config.output_dir)
    if not resume:  # before its config.json is written: another run's would be lost
        fitting.refuse_occupied(top, config)
    config = selection.resolve_prior(config, verbose=verbose)  # once, for every chain
    top.write_json(top.config, dataclasses.asdict(config))
    check_data_files(top, config, record=True)  # "npy": what evaluate checks the chains by
    chain_dirs = [top.chain(k) for k in range(chains)]
    runs = [dataclasses.replace(config, chain=k, output_dir=chain_dir.path)
            for k, chain_dir in enumerate(chain_dirs)]
    if resume:
        runs = [run for run, chain_dir in zip(runs, chain_dirs) if not chain_dir.complete]
        if not runs:
            raise ValueError(f"--resume: the run in {config.output_dir!r} is complete "
                             f"({counted(chains, 'chain')}); nothing to resume.")
    for start in range(0, len(runs), processes):
        if processes == 1:
            train(runs[start], verbose=verbose, resume=resume and _started(runs[start]))
        else:
            _train_in_processes(runs[start:start + processes], resume)
    return [(chain_dir.store(), chain_dir.read_numbers(chain_dir.history))
            for chain_dir in chain_dirs]


def _started(run):
    """Whether the chain of config ``run`` started training (it holds its config.json)."""
    return RunDir(run.output_dir).started


def _train_in_processes(runs, resume=False):
    """Runs ``keras-bnn train`` for each config concurrently; raises on a failure.

    With ``resume``, a chain that started runs ``keras-bnn train --resume``.

    The package's warnings each chain printed (``keras-bnn: NotConvergedWarning:
    ...``, :func:`keras_bnn.console.library_warnings_as_lines`) are passed on
    to this process's stderr, each line prefixed with its chain.
    """
    launched = []
    # A new chain's config goes outside its directory: the chain writes its own
    # config.json once it begins (train), and one it refused leaves nothing there.
    with tempfile.TemporaryDirectory(prefix="keras_bnn_chains_") as configs:
        for run in runs:
            chain = RunDir(run.output_dir)
            if resume and _started(run):
                where = ["--output-dir", chain.path, "--resume"]
            else:
                where = ["--config", os.path.join(configs, os.path.basename(chain.path) + ".json")]
                RunDir(configs).write_json(where[1], dataclasses.asdict(run))
            launched.append((run, subprocess.Popen(
                [sys.executable, "-m", "keras_bnn.cli", "train", *where, "--verbose", "0"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env=console.child_environment())))  # it hides TensorFlow's start-up log
        errors = [(run, process.communicate()[1], process.returncode)
                  for run, process in launched]
    for run, err, _ in errors:
        for line in err.splitlines():
            if line.startswith("keras-bnn: ") and "Warning: " in line:
                print(f"chain {run.chain}: {line}", file=sys.stderr)
    failures = [(run, err) for run, err, code in errors if code]
    if failures:
        run, err = failures[0]
        raise ChildProcessError(
            f"{counted(len(failures), 'chain')} failed; chain {run.chain} "
            f"({run.output_dir}) said: {err.strip()[-2000:]}")
